//! PCI enumeration of a firmware-less machine: what a BIOS would do, just enough for
//! NVMe functions to be reachable.
//!
//! Walks bus 0 depth first. A bridge (header type 1, such as a PCIe root port) gets
//! the next bus number as secondary bus, a subordinate bus covering what was found
//! behind it, and a memory window (1 MiB aligned, at least [`MIN_BRIDGE_WINDOW`] so a
//! device hot-added later fits) with memory decode and bus mastering on. Every NVMe
//! function (class code 010802h) gets its memory BARs sized and placed in the 32-bit
//! MMIO window (64-bit BARs too, below 4 GiB), then memory decode and bus mastering
//! on. Other functions are left as they are.
//!
//! [`PciState::scan`] is also the rescan after a hot-plug: known bridges keep their bus
//! numbers and windows; a function whose BAR0 no longer holds the address it was given
//! (a new or re-added device) is placed again inside its bridge's window.

use std::collections::BTreeMap;
use std::fmt;

/// A PCI function's bus/device/function number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciAddress {
    pub bus: u8,
    pub device: u8,
    pub function: u8,
}

impl PciAddress {
    pub const fn new(bus: u8, device: u8, function: u8) -> Self {
        PciAddress { bus, device, function }
    }
}

impl fmt::Display for PciAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:02x}:{:02x}.{}", self.bus, self.device, self.function)
    }
}

/// Configuration-space access to any function; offsets are dword aligned.
pub(crate) trait ConfigSpace {
    type Error;
    fn read32(&mut self, f: PciAddress, offset: u16) -> Result<u32, Self::Error>;
    fn write32(&mut self, f: PciAddress, offset: u16, value: u32) -> Result<(), Self::Error>;
}

/// Why enumeration failed.
#[derive(Debug)]
pub(crate) enum ScanError<E> {
    Access(E),
    /// The topology does not fit the address plan (message says where).
    Layout(String),
}

impl<E> From<E> for ScanError<E> {
    fn from(e: E) -> Self {
        ScanError::Access(e)
    }
}

/// NVMe: mass storage (01h), non-volatile memory (08h), NVM Express (02h).
pub(crate) const CLASS_NVME: u32 = 0x01_0802;
/// A bridge's smallest memory window, room for a hot-added controller.
pub(crate) const MIN_BRIDGE_WINDOW: u64 = 16 << 20;
const BRIDGE_ALIGN: u64 = 1 << 20;

const VENDOR_ID: u16 = 0x00;
const COMMAND: u16 = 0x04;
const CLASS_REV: u16 = 0x08;
const HEADER: u16 = 0x0C;
const BAR0: u16 = 0x10;
const BUS_NUMBERS: u16 = 0x18;
const IO_BASE_LIMIT: u16 = 0x1C;
const MEMORY_BASE_LIMIT: u16 = 0x20;
const PREF_BASE_LIMIT: u16 = 0x24;
const PREF_BASE_UPPER: u16 = 0x28;
const PREF_LIMIT_UPPER: u16 = 0x2C;

/// Command register: Memory Space Enable.
pub(crate) const CMD_MEMORY: u32 = 1 << 1;
/// Command register: Bus Master Enable.
pub(crate) const CMD_BUS_MASTER: u32 = 1 << 2;

/// A memory BAR as placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bar {
    /// BAR number (0–5; a 64-bit BAR takes this and the next register).
    pub index: u8,
    pub base: u64,
    pub size: u64,
    pub is_64bit: bool,
    pub prefetchable: bool,
}

/// An NVMe function found and configured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciFunction {
    pub address: PciAddress,
    pub vendor_id: u16,
    pub device_id: u16,
    /// Class code (base class, subclass, programming interface).
    pub class_code: u32,
    /// Memory BARs, ascending by index.
    pub bars: Vec<Bar>,
}

impl PciFunction {
    pub fn bar(&self, index: u8) -> Option<Bar> {
        self.bars.iter().copied().find(|b| b.index == index)
    }
}

/// An address range that BARs are placed in, front to back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Window {
    base: u64,
    next: u64,
    end: u64,
}

impl Window {
    fn take(&mut self, size: u64, align: u64) -> Option<u64> {
        let at = self.next.checked_next_multiple_of(align)?;
        let end = at.checked_add(size)?;
        if end > self.end {
            return None;
        }
        self.next = end;
        Some(at)
    }
}

#[derive(Clone, Debug)]
struct Bridge {
    secondary: u8,
    window: Window,
}

/// The address plan: bus numbers and MMIO given out so far.
pub(crate) struct PciState {
    next_bus: u16,
    root: Window,
    bridges: BTreeMap<PciAddress, Bridge>,
    functions: BTreeMap<PciAddress, PciFunction>,
}

impl PciState {
    /// A plan placing BARs and bridge windows in `mmio_base .. mmio_end`.
    pub(crate) fn new(mmio_base: u64, mmio_end: u64) -> Self {
        PciState {
            next_bus: 1,
            root: Window { base: mmio_base, next: mmio_base, end: mmio_end },
            bridges: BTreeMap::new(),
            functions: BTreeMap::new(),
        }
    }

    /// The NVMe functions present at the last scan.
    pub(crate) fn nvme_functions(&self) -> impl Iterator<Item = &PciFunction> {
        self.functions.values()
    }

    pub(crate) fn function(&self, address: PciAddress) -> Option<&PciFunction> {
        self.functions.get(&address)
    }

    /// Enumerates (first call) or rescans (later calls) from bus 0.
    pub(crate) fn scan<C: ConfigSpace>(&mut self, cs: &mut C) -> Result<(), ScanError<C::Error>> {
        let mut present = Vec::new();
        let mut root = self.root;
        self.scan_bus(cs, 0, &mut root, false, &mut present)?;
        self.root = root;
        self.functions.retain(|addr, _| present.contains(addr));
        Ok(())
    }

    fn scan_bus<C: ConfigSpace>(
        &mut self,
        cs: &mut C,
        bus: u8,
        window: &mut Window,
        fixed_buses: bool,
        present: &mut Vec<PciAddress>,
    ) -> Result<(), ScanError<C::Error>> {
        for device in 0..32u8 {
            let first = PciAddress::new(bus, device, 0);
            if cs.read32(first, VENDOR_ID)? as u16 == 0xFFFF {
                continue;
            }
            let multi = (cs.read32(first, HEADER)? >> 16) & 0x80 != 0;
            for function in 0..if multi { 8 } else { 1 } {
                let f = PciAddress::new(bus, device, function);
                let id = cs.read32(f, VENDOR_ID)?;
                if id as u16 == 0xFFFF {
                    continue;
                }
                let header_type = (cs.read32(f, HEADER)? >> 16) & 0x7F;
                let class_code = cs.read32(f, CLASS_REV)? >> 8;
                if header_type == 1 {
                    self.scan_bridge(cs, f, window, fixed_buses, present)?;
                } else if header_type == 0 && class_code == CLASS_NVME {
                    present.push(f);
                    if !self.still_placed(cs, f)? {
                        let function = place_function(cs, f, id, class_code, window)?;
                        self.functions.insert(f, function);
                    }
                }
            }
        }
        Ok(())
    }

    fn scan_bridge<C: ConfigSpace>(
        &mut self,
        cs: &mut C,
        f: PciAddress,
        parent: &mut Window,
        fixed_buses: bool,
        present: &mut Vec<PciAddress>,
    ) -> Result<(), ScanError<C::Error>> {
        if let Some(bridge) = self.bridges.get(&f).cloned() {
            let mut window = bridge.window;
            // Nothing known behind it any more (hot-unplugged): its window is free again.
            if !self.functions.keys().any(|a| a.bus == bridge.secondary) {
                window.next = window.base;
            }
            self.scan_bus(cs, bridge.secondary, &mut window, true, present)?;
            if let Some(b) = self.bridges.get_mut(&f) {
                b.window = window;
            }
            return Ok(());
        }
        if fixed_buses {
            // Its bus numbers would have to fit inside the range its parent already has.
            return Err(ScanError::Layout(format!("a bridge hot-added at {f}, behind a bridge, is not supported")));
        }
        let secondary = u8::try_from(self.next_bus)
            .map_err(|_| ScanError::Layout(format!("no bus number left for the bridge at {f}")))?;
        self.next_bus += 1;
        let primary = f.bus as u32;
        let keep = cs.read32(f, BUS_NUMBERS)? & 0xFF00_0000;
        cs.write32(f, BUS_NUMBERS, keep | 0xFF << 16 | (secondary as u32) << 8 | primary)?;
        let base = parent.next.next_multiple_of(BRIDGE_ALIGN);
        let mut window = Window { base, next: base, end: parent.end };
        self.scan_bus(cs, secondary, &mut window, false, present)?;
        let subordinate = (self.next_bus - 1) as u32;
        cs.write32(f, BUS_NUMBERS, keep | subordinate << 16 | (secondary as u32) << 8 | primary)?;
        let end = window.next.max(base + MIN_BRIDGE_WINDOW).next_multiple_of(BRIDGE_ALIGN);
        if end > parent.end {
            return Err(ScanError::Layout(format!(
                "the MMIO window ends at {:#x}; the bridge at {f} needs up to {end:#x}",
                parent.end
            )));
        }
        window.end = end;
        parent.next = end;
        // Memory base/limit hold address bits 31:20; the limit is inclusive.
        let limit = end - 1;
        cs.write32(f, MEMORY_BASE_LIMIT, ((limit >> 16) as u32 & 0xFFF0) << 16 | (base >> 16) as u32 & 0xFFF0)?;
        // I/O and prefetchable windows closed: base above limit.
        let io = cs.read32(f, IO_BASE_LIMIT)?;
        cs.write32(f, IO_BASE_LIMIT, (io & 0xFFFF_0000) | 0x00F0)?;
        cs.write32(f, PREF_BASE_LIMIT, 0x0000_FFF0)?;
        cs.write32(f, PREF_BASE_UPPER, 0)?;
        cs.write32(f, PREF_LIMIT_UPPER, 0)?;
        let command = cs.read32(f, COMMAND)?;
        cs.write32(f, COMMAND, (command & 0xFFFF) | CMD_MEMORY | CMD_BUS_MASTER)?;
        self.bridges.insert(f, Bridge { secondary, window });
        Ok(())
    }

    /// Whether `f` is a function we placed and still decodes its BAR0 where we put it.
    fn still_placed<C: ConfigSpace>(&self, cs: &mut C, f: PciAddress) -> Result<bool, ScanError<C::Error>> {
        let Some(known) = self.functions.get(&f) else { return Ok(false) };
        let Some(bar) = known.bars.first() else { return Ok(false) };
        let offset = BAR0 + 4 * bar.index as u16;
        let mut base = (cs.read32(f, offset)? & !0xF) as u64;
        if bar.is_64bit {
            base |= (cs.read32(f, offset + 4)? as u64) << 32;
        }
        let command = cs.read32(f, COMMAND)?;
        Ok(base == bar.base && command & CMD_MEMORY != 0)
    }
}

/// Sizes and places every memory BAR of `f`, then enables memory decode and bus mastering.
fn place_function<C: ConfigSpace>(
    cs: &mut C,
    f: PciAddress,
    id: u32,
    class_code: u32,
    window: &mut Window,
) -> Result<PciFunction, ScanError<C::Error>> {
    let command = cs.read32(f, COMMAND)? & 0xFFFF;
    cs.write32(f, COMMAND, command & !(CMD_MEMORY | CMD_BUS_MASTER))?;
    let mut bars = Vec::new();
    let mut index = 0u8;
    while index < 6 {
        let offset = BAR0 + 4 * index as u16;
        let original = cs.read32(f, offset)?;
        let is_io = original & 1 != 0;
        let is_64bit = !is_io && (original >> 1) & 3 == 2;
        cs.write32(f, offset, 0xFFFF_FFFF)?;
        let mut mask = (cs.read32(f, offset)? & !0xF) as u64;
        if is_64bit {
            if index == 5 {
                return Err(ScanError::Layout(format!("{f}: BAR5 claims to be 64-bit")));
            }
            cs.write32(f, offset + 4, 0xFFFF_FFFF)?;
            mask |= (cs.read32(f, offset + 4)? as u64) << 32;
        } else if mask != 0 {
            mask |= 0xFFFF_FFFF_0000_0000;
        }
        let step = if is_64bit { 2 } else { 1 };
        let size = (!mask).wrapping_add(1);
        if is_io || mask == 0 || !size.is_power_of_two() {
            // An I/O BAR, an unimplemented one, or nonsense: left unassigned.
            cs.write32(f, offset, original)?;
            index += step;
            continue;
        }
        let base = window.take(size, size.max(4096)).ok_or_else(|| {
            ScanError::Layout(format!(
                "{f}: BAR{index} of {size:#x} bytes does not fit in {:#x}..{:#x}",
                window.next, window.end
            ))
        })?;
        cs.write32(f, offset, base as u32)?;
        if is_64bit {
            cs.write32(f, offset + 4, (base >> 32) as u32)?;
        }
        bars.push(Bar { index, base, size, is_64bit, prefetchable: original & 0x8 != 0 });
        index += step;
    }
    cs.write32(f, COMMAND, command | CMD_MEMORY | CMD_BUS_MASTER)?;
    Ok(PciFunction { address: f, vendor_id: id as u16, device_id: (id >> 16) as u16, class_code, bars })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function in the fake topology: its registers and, for BARs, the size masks
    /// that make sizing work.
    #[derive(Clone)]
    struct FakeFunction {
        regs: [u32; 64],
        bar_masks: [u32; 6],
        /// For a bridge: the functions on its secondary bus, by device number.
        behind: Vec<(u8, FakeFunction)>,
    }

    impl FakeFunction {
        fn endpoint(id: u32, class: u32, bar_masks: [u32; 6], bar_types: [u32; 6]) -> Self {
            let mut regs = [0u32; 64];
            regs[0] = id;
            regs[2] = class << 8;
            regs[4..10].copy_from_slice(&bar_types);
            FakeFunction { regs, bar_masks, behind: Vec::new() }
        }

        fn nvme() -> Self {
            // BAR0: 64-bit, 16 KiB; BAR2: 32-bit, 4 KiB; BAR4: I/O.
            Self::endpoint(0x0010_1b36, CLASS_NVME, [!0x3FFF, !0, !0xFFF, 0, !0x7, 0], [0x4, 0, 0, 0, 0x1, 0])
        }

        fn root_port(behind: Vec<(u8, FakeFunction)>) -> Self {
            let mut f = Self::endpoint(0x000c_1b36, 0x06_0400, [0; 6], [0; 6]);
            f.regs[3] = 1 << 16;
            f.behind = behind;
            f
        }
    }

    struct FakeBus {
        root: Vec<(u8, FakeFunction)>,
    }

    impl FakeBus {
        /// The function at `addr`, following bridges by their secondary bus register.
        fn find(list: &mut [(u8, FakeFunction)], addr: PciAddress, bus: u8) -> Option<&mut FakeFunction> {
            for (device, f) in list.iter_mut() {
                if bus == addr.bus && *device == addr.device && addr.function == 0 {
                    return Some(f);
                }
                let secondary = (f.regs[6] >> 8) as u8;
                if (f.regs[3] >> 16) & 0x7F == 1 && secondary != 0 {
                    if let Some(found) = Self::find(&mut f.behind, addr, secondary) {
                        return Some(found);
                    }
                }
            }
            None
        }
    }

    impl ConfigSpace for FakeBus {
        type Error = ();
        fn read32(&mut self, f: PciAddress, offset: u16) -> Result<u32, ()> {
            Ok(Self::find(&mut self.root, f, 0).map_or(0xFFFF_FFFF, |func| func.regs[offset as usize / 4]))
        }
        fn write32(&mut self, f: PciAddress, offset: u16, value: u32) -> Result<(), ()> {
            if let Some(func) = Self::find(&mut self.root, f, 0) {
                let i = offset as usize / 4;
                let is_bar = (4..10).contains(&i) && (func.regs[3] >> 16) & 0x7F == 0;
                func.regs[i] = if is_bar {
                    let bar = i - 4;
                    // Upper half of a 64-bit BAR: all bits writable.
                    let upper = bar > 0 && func.regs[4 + bar - 1] & 0x7 == 0x4;
                    if upper {
                        value
                    } else {
                        value & func.bar_masks[bar] | func.regs[i] & 0xF
                    }
                } else {
                    value
                };
            }
            Ok(())
        }
    }

    fn read(bus: &mut FakeBus, f: PciAddress, offset: u16) -> u32 {
        bus.read32(f, offset).unwrap()
    }

    #[test]
    fn controllers_behind_root_ports_get_bus_numbers_windows_and_bars() {
        let mut bus = FakeBus {
            root: vec![
                (1, FakeFunction::root_port(vec![(0, FakeFunction::nvme())])),
                (2, FakeFunction::nvme()),
                (3, FakeFunction::root_port(vec![(0, FakeFunction::nvme())])),
            ],
        };
        let mut pci = PciState::new(0xC000_0000, 0xFEC0_0000);
        pci.scan(&mut bus).unwrap();

        let rp0 = PciAddress::new(0, 1, 0);
        let rp1 = PciAddress::new(0, 3, 0);
        assert_eq!(read(&mut bus, rp0, BUS_NUMBERS) & 0xFF_FFFF, 0x01_0100);
        assert_eq!(read(&mut bus, rp1, BUS_NUMBERS) & 0xFF_FFFF, 0x02_0200);
        let found: Vec<PciAddress> = pci.nvme_functions().map(|f| f.address).collect();
        assert_eq!(found, [PciAddress::new(0, 2, 0), PciAddress::new(1, 0, 0), PciAddress::new(2, 0, 0)]);

        for f in pci.nvme_functions() {
            let bar0 = f.bar(0).unwrap();
            assert_eq!((bar0.size, bar0.is_64bit), (0x4000, true));
            assert_eq!(bar0.base % bar0.size, 0);
            assert_eq!(f.bar(2).unwrap().size, 0x1000);
            assert!(f.bar(4).is_none(), "I/O BARs stay unassigned");
            assert_eq!(read(&mut bus, f.address, BAR0) & !0xF, bar0.base as u32);
            assert_eq!(read(&mut bus, f.address, COMMAND) & 0x6, CMD_MEMORY | CMD_BUS_MASTER);
            if f.address.bus != 0 {
                let port = if f.address.bus == 1 { rp0 } else { rp1 };
                let window = read(&mut bus, port, MEMORY_BASE_LIMIT);
                let (base, limit) = (((window & 0xFFF0) as u64) << 16, ((window >> 16) as u64) << 16 | 0xFFFFF);
                assert!(base <= bar0.base && bar0.base + bar0.size - 1 <= limit, "{f:?} outside {window:#x}");
                assert!(limit + 1 - base >= MIN_BRIDGE_WINDOW);
                assert_eq!(read(&mut bus, port, COMMAND) & 0x6, 0x6);
            }
        }
    }

    #[test]
    fn a_rescan_places_a_re_added_controller_inside_its_port_window() {
        let mut bus = FakeBus { root: vec![(1, FakeFunction::root_port(vec![(0, FakeFunction::nvme())]))] };
        let mut pci = PciState::new(0xC000_0000, 0xFEC0_0000);
        pci.scan(&mut bus).unwrap();
        let nvme = PciAddress::new(1, 0, 0);
        let first = pci.function(nvme).unwrap().bar(0).unwrap();

        bus.root[0].1.behind.clear();
        pci.scan(&mut bus).unwrap();
        assert!(pci.function(nvme).is_none());

        bus.root[0].1.behind.push((0, FakeFunction::nvme()));
        pci.scan(&mut bus).unwrap();
        assert_eq!(pci.function(nvme).unwrap().bar(0).unwrap(), first);
        assert_eq!(read(&mut bus, nvme, COMMAND) & 0x6, 0x6);
    }

    #[test]
    fn a_window_too_small_is_a_layout_error() {
        let mut bus = FakeBus { root: vec![(1, FakeFunction::root_port(vec![(0, FakeFunction::nvme())]))] };
        let mut pci = PciState::new(0xC000_0000, 0xC000_0000 + MIN_BRIDGE_WINDOW / 2);
        assert!(matches!(pci.scan(&mut bus), Err(ScanError::Layout(_))));
    }
}
