//! The passthrough structures against the kernel UAPI layout, the request numbers, and
//! how return values and errnos become completions and errors.

use std::mem::{offset_of, size_of};

use nix::errno::Errno;
use nvme::device::DeviceError;
use nvme::linux::passthru::{nr, NVME_IOCTL_TYPE};
use nvme::linux::{completion, errno_error, PassthruCmd, PassthruCmd64};
use nvme::spec::{Status, StatusCodeType};

#[test]
fn passthru_cmd_is_the_72_byte_uapi_layout() {
    assert_eq!(size_of::<PassthruCmd>(), 72);
    let offsets = [
        (offset_of!(PassthruCmd, opcode), 0),
        (offset_of!(PassthruCmd, flags), 1),
        (offset_of!(PassthruCmd, rsvd1), 2),
        (offset_of!(PassthruCmd, nsid), 4),
        (offset_of!(PassthruCmd, cdw2), 8),
        (offset_of!(PassthruCmd, cdw3), 12),
        (offset_of!(PassthruCmd, metadata), 16),
        (offset_of!(PassthruCmd, addr), 24),
        (offset_of!(PassthruCmd, metadata_len), 32),
        (offset_of!(PassthruCmd, data_len), 36),
        (offset_of!(PassthruCmd, cdw10), 40),
        (offset_of!(PassthruCmd, cdw11), 44),
        (offset_of!(PassthruCmd, cdw12), 48),
        (offset_of!(PassthruCmd, cdw13), 52),
        (offset_of!(PassthruCmd, cdw14), 56),
        (offset_of!(PassthruCmd, cdw15), 60),
        (offset_of!(PassthruCmd, timeout_ms), 64),
        (offset_of!(PassthruCmd, result), 68),
    ];
    for (i, (got, want)) in offsets.iter().enumerate() {
        assert_eq!(got, want, "field {i}");
    }
}

#[test]
fn passthru_cmd64_is_the_80_byte_uapi_layout() {
    assert_eq!(size_of::<PassthruCmd64>(), 80);
    assert_eq!(offset_of!(PassthruCmd64, nsid), 4);
    assert_eq!(offset_of!(PassthruCmd64, metadata), 16);
    assert_eq!(offset_of!(PassthruCmd64, addr), 24);
    assert_eq!(offset_of!(PassthruCmd64, data_len), 36);
    assert_eq!(offset_of!(PassthruCmd64, cdw10), 40);
    assert_eq!(offset_of!(PassthruCmd64, cdw15), 60);
    assert_eq!(offset_of!(PassthruCmd64, timeout_ms), 64);
    assert_eq!(offset_of!(PassthruCmd64, rsvd2), 68);
    assert_eq!(offset_of!(PassthruCmd64, result), 72);
}

#[test]
fn the_narrow_form_keeps_every_field_but_the_result() {
    let wide = PassthruCmd64 {
        opcode: 2,
        nsid: 7,
        cdw2: 1,
        cdw3: 2,
        metadata: 0x1000,
        addr: 0x2000,
        metadata_len: 8,
        data_len: 4096,
        cdw10: 10,
        cdw11: 11,
        cdw12: 12,
        cdw13: 13,
        cdw14: 14,
        cdw15: 15,
        timeout_ms: 5000,
        result: u64::MAX,
        ..Default::default()
    };
    let narrow = wide.to_32();
    assert_eq!(
        (narrow.opcode, narrow.nsid, narrow.cdw2, narrow.cdw3, narrow.metadata, narrow.addr),
        (2, 7, 1, 2, 0x1000, 0x2000)
    );
    assert_eq!((narrow.metadata_len, narrow.data_len, narrow.timeout_ms, narrow.result), (8, 4096, 5000, 0));
    assert_eq!(
        [narrow.cdw10, narrow.cdw11, narrow.cdw12, narrow.cdw13, narrow.cdw14, narrow.cdw15],
        [10, 11, 12, 13, 14, 15]
    );
}

#[test]
#[allow(clippy::unnecessary_cast)] // the request type is c_ulong: u64 here, u32 on 32-bit hosts
fn request_numbers_are_the_kernels() {
    let rw = |n: u8, size: usize| nix::request_code_readwrite!(NVME_IOCTL_TYPE, n, size) as u64;
    let none = |n: u8| nix::request_code_none!(NVME_IOCTL_TYPE, n) as u64;
    assert_eq!(rw(nr::ADMIN_CMD, size_of::<PassthruCmd>()), 0xC048_4E41);
    assert_eq!(rw(nr::IO_CMD, size_of::<PassthruCmd>()), 0xC048_4E43);
    assert_eq!(rw(nr::ADMIN64_CMD, size_of::<PassthruCmd64>()), 0xC050_4E47);
    assert_eq!(rw(nr::IO64_CMD, size_of::<PassthruCmd64>()), 0xC050_4E48);
    assert_eq!(none(nr::RESET), 0x4E44);
    assert_eq!(none(nr::SUBSYS_RESET), 0x4E45);
    assert_eq!(none(nr::RESCAN), 0x4E46);
}

#[test]
fn zero_is_success_with_dw0_and_dw1_from_the_result() {
    let c = completion(0, 0x0000_0002_0000_0001, 1, "x").unwrap();
    assert!(c.status().is_success());
    assert_eq!((c.dw0, c.dw1, c.sq_id), (1, 2, 1));
    assert!(!c.phase());
}

#[test]
fn a_positive_return_is_the_status_field_with_dnr_and_more() {
    // As seen in the guest: a reserved CNS answers 0x4002, DNR | Invalid Field in Command.
    let c = completion(0x4002, 0, 0, "Identify CNS FFh").unwrap();
    let s = c.status();
    assert!(s.same_code(&Status::INVALID_FIELD));
    assert!(s.dnr && !s.more);
    let c = completion(0x2000 | 0x0080, 0, 1, "Read").unwrap();
    assert!(c.status().same_code(&Status::LBA_OUT_OF_RANGE) && c.status().more && !c.status().dnr);
    let c = completion(0x0285, 0, 1, "Compare").unwrap();
    assert_eq!(c.status().sct, StatusCodeType::MediaAndDataIntegrity);
    assert_eq!(c.status().sc, 0x85);
    let c = completion(0x1802, 0, 1, "Write").unwrap();
    assert_eq!(c.status().crd, 3);
}

#[test]
fn a_status_the_driver_made_up_is_an_error_not_the_drives_answer() {
    for field in [0x370, 0x371, 0x4371, 0x37F] {
        let e = completion(field, 0, 1, "Read NSID 1").unwrap_err();
        let DeviceError::Driver(text) = &e else { panic!("{e:?}") };
        assert!(text.starts_with("Read NSID 1: the Linux driver completed it itself"), "{text}");
    }
    // 360h, Controller Pathing Error, is the controller's.
    assert!(completion(0x360, 0, 1, "Read").is_ok());
}

#[test]
fn returns_outside_the_status_field_are_errors() {
    for ret in [0x8000, i32::MAX, -1, -4] {
        let e = completion(ret, 0, 0, "x").unwrap_err();
        assert!(e.to_string().contains("neither an errno nor an NVMe status"), "{e}");
    }
}

#[test]
fn every_errno_is_one_clear_line() {
    let e = errno_error(Errno::EINTR, "Format NVM NSID 1", 300_000);
    let DeviceError::Timeout { what, after_ms } = &e else { panic!("{e:?}") };
    assert_eq!(*after_ms, 300_000);
    assert!(what.contains("cancelled by the Linux driver (EINTR)"), "{what}");
    assert!(e.to_string().ends_with("no completion within 300000 ms"), "{e}");

    let cases: [(Errno, &str); 9] = [
        (Errno::EACCES, "run nvtest as root"),
        (Errno::EPERM, "run nvtest as root"),
        (Errno::EINVAL, "refused it before sending it (EINVAL)"),
        (Errno::ENODEV, "the device is gone (ENODEV)"),
        (Errno::ENXIO, "the device is gone (ENXIO)"),
        (Errno::EWOULDBLOCK, "no live path"),
        (Errno::EIO, "without an NVMe status (EIO)"),
        (Errno::ENOMEM, "ENOMEM"),
        (Errno::EBADF, "EBADF"),
    ];
    for (errno, needle) in cases {
        let text = errno_error(errno, "Identify", 10).to_string();
        assert!(text.starts_with("Identify: "), "{text}");
        assert!(text.contains(needle), "{errno}: {text}");
        assert!(!text.contains('\n'), "{text}");
    }
    assert!(matches!(errno_error(Errno::ENOTTY, "x", 1), DeviceError::Unsupported(_)));
}
