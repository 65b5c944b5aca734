//! The safety gate on fake kernel trees: every kind of refusal, the pass case with its
//! exclusive opens, the subsystem and multipath scope, failing closed, and which cases
//! count as destructive under --filter and --preserve.

use std::path::PathBuf;

use nvme::linux::fake::FakeTree;
use nvtest::run::{run_on, RunError, RunOptions, RunTarget, Selection};
use nvtest::safety::{destructive_cases, gate, GateError, SafetyOptions};
use nvtest::suite::{ExpandedCase, LoadedSuite, SuiteInfo};

fn case(suite: &str, name: &str, destructive: bool) -> ExpandedCase {
    ExpandedCase { destructive, ..ExpandedCase::named(suite, name) }
}

fn suite(name: &str, destructive: bool, cases: &[&str]) -> LoadedSuite {
    LoadedSuite {
        path: format!("{name}.yaml").into(),
        suite: SuiteInfo { name: name.into(), title: "t".into(), spec: vec![], destructive },
        cases: cases.iter().map(|c| case(name, c, destructive)).collect(),
    }
}

fn allowed() -> SafetyOptions {
    SafetyOptions { allow_destructive: true, confirm_serial: Some("SN-1".into()), preserve: false }
}

/// nvme0 (serial SN-1) with namespace 1 (nvme0n1, partition nvme0n1p1) and namespace 2.
fn drive() -> (tempfile::TempDir, FakeTree) {
    let dir = tempfile::tempdir().unwrap();
    let mut t = FakeTree::new(dir.path()).unwrap();
    t.controller(0, 0, "SN-1").unwrap();
    t.namespace(0, 1, 1).unwrap();
    t.namespace(0, 2, 2).unwrap();
    t.partition("nvme0n1", 1).unwrap();
    (dir, t)
}

/// The refusal lines of a gate that must refuse.
fn refused(t: &FakeTree, options: &SafetyOptions) -> Vec<String> {
    let cases = [case("namespaces", "create", true)];
    let refs: Vec<&ExpandedCase> = cases.iter().collect();
    match gate(&t.host(), &t.node("nvme0"), &refs, options) {
        Err(GateError::Refused { target, findings }) => {
            assert_eq!(target, t.node("nvme0").display().to_string());
            for line in &findings {
                assert!(!line.contains('\n'), "one line each: {line}");
            }
            findings
        }
        other => panic!("expected a refusal, got {other:?}"),
    }
}

fn has(lines: &[String], needle: &str) -> bool {
    lines.iter().any(|l| l.contains(needle))
}

#[test]
fn an_unused_drive_passes_and_its_namespaces_are_held_exclusively() {
    let (_dir, t) = drive();
    let cases = [case("namespaces", "create", true)];
    let refs: Vec<&ExpandedCase> = cases.iter().collect();
    let claims = gate(&t.host(), &t.node("nvme0"), &refs, &allowed()).unwrap().expect("claims for a destructive run");
    let held: Vec<PathBuf> = claims.paths().into_iter().map(PathBuf::from).collect();
    assert_eq!(held, [t.node("nvme0n1"), t.node("nvme0n2")]);
}

#[test]
fn without_destructive_cases_nothing_is_checked_or_held() {
    let (_dir, mut t) = drive();
    t.mount("nvme0n1p1", "/mnt/data", "ext4").unwrap();
    assert!(gate(&t.host(), &t.node("nvme0"), &[], &SafetyOptions::default()).unwrap().is_none());
}

#[test]
fn a_path_that_is_not_a_controller_is_a_bad_target_even_without_destructive_cases() {
    let (_dir, t) = drive();
    let e = gate(&t.host(), &t.node("nvme0n1"), &[], &SafetyOptions::default()).unwrap_err();
    let GateError::BadTarget(line) = e else { panic!("{e:?}") };
    assert!(line.contains("is the block device of namespace nvme0n1, not a controller"), "{line}");
}

#[test]
fn destructive_cases_need_allow_destructive() {
    let (_dir, t) = drive();
    let lines = refused(&t, &SafetyOptions { allow_destructive: false, ..allowed() });
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("1 destructive case(s) of suite(s) `namespaces`"), "{lines:?}");
    assert!(lines[0].contains("give --allow-destructive") && lines[0].contains("--preserve"), "{lines:?}");
}

#[test]
fn destructive_cases_need_the_serial_and_it_must_match() {
    let (_dir, t) = drive();
    let lines = refused(&t, &SafetyOptions { confirm_serial: None, ..allowed() });
    assert!(has(&lines, "need --confirm-serial SN") && has(&lines, "serial `SN-1`"), "{lines:?}");
    let lines = refused(&t, &SafetyOptions { confirm_serial: Some("SN-2".into()), ..allowed() });
    assert!(has(&lines, "--confirm-serial `SN-2` does not match") && has(&lines, "serial is `SN-1`"), "{lines:?}");
    assert!(has(&lines, "check that you named the right drive"), "{lines:?}");
}

#[test]
fn a_mounted_partition_is_refused_with_the_mount_point() {
    let (_dir, mut t) = drive();
    t.mount("nvme0n1p1", "/mnt/data", "ext4").unwrap();
    let lines = refused(&t, &allowed());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("nvme0n1p1 (partition of namespace 1 of nvme0) is mounted at /mnt/data (ext4)"),
        "{lines:?}"
    );
    assert!(lines[0].contains("unmount it (umount /mnt/data)"), "{lines:?}");
}

#[test]
fn a_mount_found_by_its_source_counts_too() {
    // btrfs shows an anonymous device number; the source still names the partition.
    let (_dir, mut t) = drive();
    t.mount_line("0:45", "/srv", "btrfs", "/dev/nvme0n1p1").unwrap();
    let lines = refused(&t, &allowed());
    assert!(has(&lines, "is mounted at /srv (btrfs)"), "{lines:?}");
}

#[test]
fn the_root_filesystem_drive_is_always_refused() {
    let (_dir, mut t) = drive();
    t.mount("nvme0n1p1", "/", "ext4").unwrap();
    let lines = refused(&t, &allowed());
    assert!(has(&lines, "holds the root filesystem (/)") && has(&lines, "use another drive"), "{lines:?}");
}

#[test]
fn swap_is_refused() {
    let (_dir, mut t) = drive();
    t.swap("nvme0n2").unwrap();
    let lines = refused(&t, &allowed());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("(namespace 2 of nvme0) is in use as swap: turn it off (swapoff /dev/nvme0n2)"),
        "{lines:?}"
    );
}

#[test]
fn device_mapper_and_md_holders_are_refused_and_what_is_on_them_is_checked() {
    let (_dir, mut t) = drive();
    let dm = t.device_mapper("nvme0n1p1", 0, "vg0-data").unwrap();
    t.md("nvme0n2", 5).unwrap();
    t.mount(&dm, "/data", "xfs").unwrap();
    let lines = refused(&t, &allowed());
    assert!(
        has(&lines, "nvme0n1p1 (partition of namespace 1 of nvme0) is held by dm-0 (device-mapper `vg0-data`)"),
        "{lines:?}"
    );
    assert!(has(&lines, "(namespace 2 of nvme0) is held by md5 (md RAID)"), "{lines:?}");
    assert!(has(&lines, "dm-0 (device-mapper `vg0-data` on ") && has(&lines, "is mounted at /data (xfs)"), "{lines:?}");
    assert!(has(&lines, "dmsetup remove"), "{lines:?}");
}

#[test]
fn a_root_filesystem_on_device_mapper_over_the_drive_is_refused() {
    let (_dir, mut t) = drive();
    let dm = t.device_mapper("nvme0n1p1", 0, "vg0-root").unwrap();
    t.mount_line("0:31", "/", "btrfs", "/dev/mapper/vg0-root").unwrap();
    let _ = dm;
    let lines = refused(&t, &allowed());
    assert!(has(&lines, "holds the root filesystem (/)"), "{lines:?}");
}

#[test]
fn other_openers_of_any_node_are_refused() {
    let (_dir, mut t) = drive();
    t.opener(4242, "smartd", "nvme0").unwrap();
    t.opener(4343, "fio", "ng0n2").unwrap();
    t.opener(4444, "dd", "nvme0n1p1").unwrap();
    t.opener(4545, "bash", "sda").unwrap();
    let lines = refused(&t, &allowed());
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(has(&lines, "process 4242 (smartd) has ") && has(&lines, "(controller nvme0) open: stop it"), "{lines:?}");
    assert!(
        has(&lines, "process 4343 (fio) has ") && has(&lines, "(generic device of namespace 2 of nvme0)"),
        "{lines:?}"
    );
    assert!(has(&lines, "process 4444 (dd)"), "{lines:?}");
}

#[test]
fn a_busy_exclusive_open_is_refused() {
    let (_dir, t) = drive();
    t.flag_node("nvme0n2", "busy").unwrap();
    let lines = refused(&t, &allowed());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("the kernel reports ") && lines[0].contains("busy (an exclusive open failed with EBUSY)"),
        "{lines:?}"
    );
}

#[test]
fn every_finding_is_reported_at_once() {
    let (_dir, mut t) = drive();
    t.mount("nvme0n1p1", "/mnt/a", "ext4").unwrap();
    t.swap("nvme0n2").unwrap();
    let lines = refused(&t, &SafetyOptions::default());
    assert_eq!(lines.len(), 4, "allow, serial, mount, swap: {lines:?}");
}

#[test]
fn the_other_controllers_of_the_subsystem_are_checked() {
    let (_dir, mut t) = drive();
    t.controller(1, 0, "SN-1").unwrap();
    t.namespace(1, 3, 3).unwrap();
    t.mount("nvme1n3", "/backup", "ext4").unwrap();
    let lines = refused(&t, &allowed());
    assert!(has(&lines, "(namespace 3 of nvme1, same NVM subsystem as nvme0) is mounted at /backup"), "{lines:?}");
    // A controller of another subsystem is not the drive under test.
    let (_dir2, mut u) = drive();
    u.controller(1, 1, "OTHER").unwrap();
    u.namespace(1, 3, 3).unwrap();
    u.mount("nvme1n3", "/backup", "ext4").unwrap();
    let cases = [case("namespaces", "create", true)];
    let refs: Vec<&ExpandedCase> = cases.iter().collect();
    assert!(gate(&u.host(), &u.node("nvme0"), &refs, &allowed()).is_ok());
}

#[test]
fn a_mounted_multipath_head_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut t = FakeTree::new(dir.path()).unwrap();
    t.controller(0, 0, "SN-1").unwrap();
    t.controller(1, 0, "SN-1").unwrap();
    t.multipath_namespace(0, 0, 1, 1).unwrap();
    t.multipath_namespace(0, 1, 1, 1).unwrap();
    t.mount("nvme0n1", "/shared", "xfs").unwrap();
    let lines = refused(&t, &allowed());
    assert!(has(&lines, "is mounted at /shared (xfs)"), "{lines:?}");
}

#[test]
fn views_that_cannot_be_read_refuse_the_run() {
    let (_dir, t) = drive();
    std::fs::remove_file(t.root().join("proc/self/mountinfo")).unwrap();
    std::fs::remove_file(t.root().join("proc/swaps")).unwrap();
    let lines = refused(&t, &allowed());
    assert!(has(&lines, "mountinfo") && has(&lines, "mount /proc so that mounts can be checked"), "{lines:?}");
    assert!(has(&lines, "mount /proc so that swap can be checked"), "{lines:?}");

    // A process whose open files cannot be listed.
    let (_dir, t) = drive();
    let p = t.root().join("proc/777");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("comm"), "secret\n").unwrap();
    std::fs::write(p.join("fd"), "not a directory").unwrap();
    let lines = refused(&t, &allowed());
    assert!(has(&lines, "cannot see which files process 777 (secret) has open"), "{lines:?}");
}

#[test]
fn filter_and_preserve_decide_which_destructive_cases_run() {
    let suites = [suite("namespaces", true, &["create", "delete"]), suite("basics", false, &["identify"])];
    let select = |s: Selection| move |c: &ExpandedCase| s.selects(c, None);
    let all = select(Selection::default());
    let names =
        |cases: Vec<&ExpandedCase>| cases.iter().map(|c| format!("{}::{}", c.suite, c.name)).collect::<Vec<_>>();
    assert_eq!(names(destructive_cases(&suites, &all, false)), ["namespaces::create", "namespaces::delete"]);
    assert!(destructive_cases(&suites, &all, true).is_empty());
    let filtered = select(Selection { filters: vec!["basics".into()], ..Selection::default() });
    assert!(destructive_cases(&suites, &filtered, false).is_empty());
    let one = select(Selection { filters: vec!["namespaces::delete".into()], exact: true, ..Selection::default() });
    assert_eq!(names(destructive_cases(&suites, &one, false)), ["namespaces::delete"]);
}

fn options(target: RunTarget, safety: SafetyOptions, dir: &tempfile::TempDir) -> RunOptions {
    RunOptions {
        targets: vec![target],
        safety,
        console_file: Some(dir.path().join("console.txt")),
        ..RunOptions::default()
    }
}

#[test]
fn a_run_on_a_used_drive_is_refused_before_the_device_opens() {
    let (dir, mut t) = drive();
    t.mount("nvme0n1p1", "/mnt/data", "ext4").unwrap();
    let suites = [suite("namespaces", true, &["create"])];
    let o = options(RunTarget::Kernel(t.node("nvme0")), allowed(), &dir);
    let e = run_on(&t.host(), &suites, &o).unwrap_err();
    let RunError::Refused(text) = &e else { panic!("{e:?}") };
    assert!(
        text.starts_with(&format!(
            "refusing to run destructive cases on {} (nothing was sent to it):",
            t.node("nvme0").display()
        )),
        "{text}"
    );
    assert!(text.contains("\n  ") && text.contains("is mounted at /mnt/data"), "{text}");
}

#[test]
fn with_preserve_the_gate_lets_the_run_reach_the_device() {
    // The fake controller is a regular file: opening it as a device fails (ENOTTY), which
    // shows the run got past the gate to the open.
    let (dir, mut t) = drive();
    t.mount("nvme0n1p1", "/", "ext4").unwrap();
    let suites = [suite("namespaces", true, &["create"])];
    let preserve = SafetyOptions { preserve: true, ..SafetyOptions::default() };
    let o = options(RunTarget::Kernel(t.node("nvme0")), preserve, &dir);
    let e = run_on(&t.host(), &suites, &o).unwrap_err();
    let RunError::Target(text) = &e else { panic!("{e:?}") };
    assert!(text.contains("does not answer the NVMe passthrough ioctls (ENOTTY)"), "{text}");
}

#[test]
fn a_loop_device_on_a_namespace_is_refused_with_the_chain() {
    // losetup /dev/loop0 /dev/nvme0n2: nothing holds the namespace open, no holders/.
    let (_dir, mut t) = drive();
    let backing = t.node("nvme0n2");
    t.loop_device(0, &backing).unwrap();
    let lines = refused(&t, &allowed());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(has(&lines, "(namespace 2 of nvme0) backs ") && has(&lines, "loop0 (a loop device)"), "{lines:?}");
    assert!(has(&lines, "losetup -d "), "{lines:?}");
}

#[test]
fn a_filesystem_mounted_on_a_loop_device_over_the_drive_is_traced_back() {
    let (_dir, mut t) = drive();
    let backing = t.node("nvme0n1p1");
    let lo = t.loop_device(3, &backing).unwrap();
    t.mount(&lo, "/mnt/x", "ext4").unwrap();
    let lines = refused(&t, &allowed());
    assert!(
        has(&lines, "loop3 (loop device on ")
            && has(&lines, "(partition of namespace 1 of nvme0)) is mounted at /mnt/x (ext4)"),
        "the mount names the whole chain: {lines:?}"
    );
}

#[test]
fn a_loop_device_backed_by_a_file_on_the_drive_is_refused() {
    // A file on a filesystem of namespace 1 backs loop1; the filesystem was lazily
    // unmounted, so only the loop device holds it.
    let (_dir, mut t) = drive();
    let image = t.file_on("nvme0n1", "mnt/ns1/disk.img").unwrap();
    let lo = t.loop_device(1, &image).unwrap();
    let lines = refused(&t, &allowed());
    assert!(has(&lines, "(namespace 1 of nvme0) holds ") && has(&lines, "disk.img, the backing file of "), "{lines:?}");
    // And a loop device on that loop device: stacked at any depth.
    let inner = t.node(&lo);
    let lo2 = t.loop_device(2, &inner).unwrap();
    t.mount(&lo2, "/mnt/inner", "ext4").unwrap();
    let lines = refused(&t, &allowed());
    assert!(has(&lines, "loop2 (loop device on ") && has(&lines, "is mounted at /mnt/inner"), "{lines:?}");
}

#[test]
fn a_loop_device_on_another_disk_is_not_the_drive() {
    let (_dir, mut t) = drive();
    let sda = t.node("sda");
    t.loop_device(0, &sda).unwrap();
    let elsewhere = t.file_on("sda1", "home/disk.img").unwrap();
    t.loop_device(1, &elsewhere).unwrap();
    let cases = [case("namespaces", "create", true)];
    let refs: Vec<&ExpandedCase> = cases.iter().collect();
    assert!(gate(&t.host(), &t.node("nvme0"), &refs, &allowed()).is_ok());
}

#[test]
fn a_loop_device_whose_backing_cannot_be_told_fails_closed() {
    let (_dir, mut t) = drive();
    t.loop_device(5, std::path::Path::new("/nonexistent/disk.img (deleted)")).unwrap();
    let lines = refused(&t, &allowed());
    assert!(has(&lines, "cannot tell what backs loop device ") && has(&lines, "loop5"), "{lines:?}");
}

#[test]
fn a_memory_mapping_of_a_namespace_is_refused_after_its_descriptor_closed() {
    let (_dir, mut t) = drive();
    let node = t.node("nvme0n2");
    t.mapping(5151, "mapper", &node, "00:05").unwrap();
    let lines = refused(&t, &allowed());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        has(&lines, "process 5151 (mapper) has ") && has(&lines, "(namespace 2 of nvme0) memory-mapped"),
        "{lines:?}"
    );
}

#[test]
fn a_mapped_or_open_file_on_the_drives_filesystem_is_refused() {
    // The filesystem was lazily unmounted (no mount line), but a process still maps a
    // file of it, and another has one open.
    let (_dir, mut t) = drive();
    let file = t.file_on("nvme0n1p1", "mnt/data/db.bin").unwrap();
    let dev = {
        let text = std::fs::read_to_string(t.root().join("sys/class/block/nvme0n1p1/dev")).unwrap();
        let (maj, min) = text.trim().split_once(':').unwrap();
        format!("{:02x}:{:02x}", maj.parse::<u32>().unwrap(), min.parse::<u32>().unwrap())
    };
    t.mapping(6161, "db", &file, &dev).unwrap();
    let dir = t.root().join("proc/6262");
    std::fs::create_dir_all(dir.join("fd")).unwrap();
    std::fs::write(dir.join("comm"), "tail\n").unwrap();
    std::os::unix::fs::symlink(&file, dir.join("fd/4")).unwrap();
    let lines = refused(&t, &allowed());
    assert!(has(&lines, "process 6161 (db) has ") && has(&lines, "db.bin, a file on "), "{lines:?}");
    assert!(has(&lines, "process 6262 (tail) has ") && has(&lines, "db.bin open, a file on "), "{lines:?}");
}

#[test]
fn a_mount_in_another_mount_namespace_is_named_with_its_process() {
    let (_dir, mut t) = drive();
    t.mount_elsewhere(3131, "containerd", "nvme0n2", "/var/lib/data", "xfs").unwrap();
    let lines = refused(&t, &allowed());
    assert!(
        has(&lines, "(namespace 2 of nvme0) is mounted at /var/lib/data (xfs) in the mount namespace of process 3131"),
        "{lines:?}"
    );
    assert!(has(&lines, "nsenter -t 3131 -m umount /var/lib/data"), "{lines:?}");
}

#[test]
fn the_recheck_sees_what_started_using_the_drive_after_the_gate() {
    let (_dir, mut t) = drive();
    let cases = [case("namespaces", "create", true)];
    let refs: Vec<&ExpandedCase> = cases.iter().collect();
    let mut guard = gate(&t.host(), &t.node("nvme0"), &refs, &allowed()).unwrap().expect("a guard");
    guard.recheck().expect("nothing changed: the recheck passes");
    // A namespace created by the run is held from the next check on.
    t.namespace(0, 3, 3).unwrap();
    guard.recheck().unwrap();
    let held: Vec<PathBuf> = guard.paths().into_iter().map(PathBuf::from).collect();
    assert_eq!(held, [t.node("nvme0n1"), t.node("nvme0n2"), t.node("nvme0n3")]);
    // A loop device set up during the run.
    let backing = t.node("nvme0n3");
    t.loop_device(0, &backing).unwrap();
    let lines = guard.recheck().unwrap_err();
    assert!(has(&lines, "(namespace 3 of nvme0) backs ") && has(&lines, "loop0"), "{lines:?}");
}

/// `inner` behind the gate's recheck, the drive having passed the gate for `cases`.
fn rechecked<R>(t: &FakeTree, cases: &[ExpandedCase], inner: R) -> nvtest::run::Rechecked<R> {
    let refs: Vec<&ExpandedCase> = cases.iter().collect();
    let guard = gate(&t.host(), &t.node("nvme0"), &refs, &allowed()).unwrap();
    nvtest::run::Rechecked::new(inner, guard.map(|g| std::sync::Arc::new(std::sync::Mutex::new(g))))
}

/// Counts the cases it is handed; every case passes.
struct Counting(Vec<String>);

impl nvtest::run::CaseRunner for Counting {
    fn identity(&self) -> nvtest::identity::DeviceIdentity {
        nvtest::identity::DeviceIdentity::default()
    }

    fn run_case(&mut self, case: &ExpandedCase, _seed: u64) -> nvtest::verdict::CaseOutcome {
        self.0.push(format!("{}::{}", case.suite, case.name));
        nvtest::verdict::CaseOutcome {
            figures: Vec::new(),
            claims: Vec::new(),
            verdict: nvtest::verdict::Verdict::Pass,
            log: vec![],
            duration: std::time::Duration::ZERO,
        }
    }
}

#[test]
fn a_loop_device_set_up_mid_run_stops_the_next_destructive_case() {
    use nvtest::run::CaseRunner;
    use nvtest::verdict::Verdict;
    let (_dir, mut t) = drive();
    let first = [case("namespaces", "create", true), case("namespaces", "delete", true)];
    let mut runner = rechecked(&t, &first, Counting(Vec::new()));
    assert_eq!(runner.run_case(&first[0], 0).verdict, Verdict::Pass);
    // Set up while the first case runs: seen before the next destructive case.
    let backing = t.node("nvme0n1");
    t.loop_device(0, &backing).unwrap();
    match &runner.run_case(&first[1], 0).verdict {
        Verdict::Error(e) => assert!(
            e.contains(
                "destructive case not run: before case `delete`, the drive gained another user since the safety \
                 gate's check"
            ) && e.contains("(namespace 1 of nvme0) backs ")
                && e.contains("loop0"),
            "{e}"
        ),
        other => panic!("expected an error, got {other:?}"),
    }
    // Read-only cases still run; later destructive ones stay stopped, in any suite.
    assert_eq!(runner.run_case(&case("namespaces", "identify", false), 0).verdict, Verdict::Pass);
    let later = runner.run_case(&case("trim", "deallocate", true), 0);
    assert!(matches!(&later.verdict, Verdict::Error(e) if e.contains("before case `delete`")), "{later:?}");
}

#[test]
fn a_loop_device_set_up_between_suites_is_found_by_the_suites_recheck() {
    use nvtest::run::CaseRunner;
    use nvtest::verdict::Verdict;
    let (_dir, mut t) = drive();
    let first = [case("namespaces", "create", true)];
    let mut runner = rechecked(&t, &first, Counting(Vec::new()));
    assert_eq!(runner.run_case(&first[0], 0).verdict, Verdict::Pass);
    let backing = t.node("nvme0n1");
    t.loop_device(0, &backing).unwrap();
    // The next suite's first case is read-only: the suite's recheck stops what follows.
    assert_eq!(runner.run_case(&case("trim", "identify", false), 0).verdict, Verdict::Pass);
    match &runner.run_case(&case("trim", "deallocate", true), 0).verdict {
        Verdict::Error(e) => assert!(
            e.contains("destructive case not run: the safety gate's check before suite `trim` found the drive in use")
                && e.contains("loop0"),
            "{e}"
        ),
        other => panic!("expected an error, got {other:?}"),
    }
}

/// Runs `during` inside the case, then fails it as the drive's fault.
struct FailsAfter(Box<dyn FnMut()>);

impl nvtest::run::CaseRunner for FailsAfter {
    fn identity(&self) -> nvtest::identity::DeviceIdentity {
        nvtest::identity::DeviceIdentity::default()
    }

    fn run_case(&mut self, _case: &ExpandedCase, _seed: u64) -> nvtest::verdict::CaseOutcome {
        (self.0)();
        nvtest::verdict::CaseOutcome {
            figures: Vec::new(),
            claims: Vec::new(),
            verdict: nvtest::verdict::Verdict::Fail(nvtest::verdict::Failure {
                rule: nvtest::rules::metadata_returned(),
                sent: "Read NSID 1".into(),
                observed: "other data".into(),
                expected: "the data written".into(),
            }),
            log: vec![],
            duration: std::time::Duration::ZERO,
        }
    }
}

#[test]
fn a_failure_after_another_user_appeared_during_the_case_is_an_error_naming_it() {
    use nvtest::run::CaseRunner;
    use nvtest::verdict::Verdict;
    let (_dir, t) = drive();
    let cases = [case("namespaces", "isolation", true), case("namespaces", "last-lba", true)];
    let shared = std::rc::Rc::new(std::cell::RefCell::new(t));
    let during = {
        let t = shared.clone();
        Box::new(move || t.borrow_mut().opener(7272, "writer", "nvme0n1").unwrap())
    };
    let mut runner = rechecked(&shared.borrow(), &cases, FailsAfter(during));
    let outcome = runner.run_case(&cases[0], 0);
    match &outcome.verdict {
        Verdict::Error(e) => assert!(
            e.starts_with("the drive gained another user during the case")
                && e.contains("so its failure is not laid on the drive")
                && e.contains("process 7272 (writer) has "),
            "{e}"
        ),
        other => panic!("expected an error, got {other:?}"),
    }
    assert!(outcome.log.iter().any(|l| l.starts_with("the failure set aside: ")), "{:?}", outcome.log);
    let next = runner.run_case(&cases[1], 0);
    assert!(
        matches!(&next.verdict, Verdict::Error(e) if e.starts_with("destructive case not run: after case `isolation`")),
        "{next:?}"
    );
}

#[test]
fn a_process_that_only_looks_at_the_drive_for_a_moment_does_not_stop_the_run() {
    use nvtest::run::CaseRunner;
    use nvtest::verdict::Verdict;
    let (_dir, mut t) = drive();
    let cases = [case("namespaces", "create", true), case("namespaces", "delete", true)];
    let mut runner = rechecked(&t, &cases, Counting(Vec::new()));
    assert_eq!(runner.run_case(&cases[0], 0).verdict, Verdict::Pass);
    // udev's probe of a new namespace: open for a moment, then gone.
    t.opener(7171, "systemd-udevd", "nvme0n2").unwrap();
    let prober = t.root().join("proc/7171");
    let gone = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(400));
        std::fs::remove_dir_all(prober).unwrap();
    });
    assert_eq!(runner.run_case(&cases[1], 0).verdict, Verdict::Pass);
    gone.join().unwrap();
}

#[test]
fn a_namespace_registered_with_an_io_uring_ring_is_refused() {
    let (_dir, mut t) = drive();
    // Its own descriptor closed: only the ring's fdinfo names it.
    t.io_uring_ring(6161, "ringer", &["nvme0n2"], true).unwrap();
    // A ring of another process holding files of other disks only.
    t.io_uring_ring(6262, "other", &["sda1", "data.db"], true).unwrap();
    let lines = refused(&t, &allowed());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        has(&lines, "process 6161 (ringer) has ")
            && has(
                &lines,
                "(namespace 2 of nvme0) registered as a fixed file of its io_uring ring (descriptor 5; the file stays \
                 open after its own descriptor is closed): stop it, or wait for it to finish"
            ),
        "{lines:?}"
    );
}

#[test]
fn a_ring_whose_files_the_kernel_did_not_list_fails_closed() {
    let (_dir, mut t) = drive();
    t.io_uring_ring(6363, "busy", &["nvme0n1"], false).unwrap();
    let lines = refused(&t, &allowed());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        has(&lines, "cannot see which files process 6363 (busy) registered with its io_uring ring (descriptor 5: ")
            && has(&lines, "): stop it, or run nvtest again when the ring is idle"),
        "{lines:?}"
    );
}

#[test]
fn a_namespace_exported_by_the_kernels_nvme_target_is_refused() {
    let (_dir, mut t) = drive();
    t.module("nvmet").unwrap();
    let node = t.node("nvme0n1");
    t.nvmet_namespace("nqn.2026-12.io.example:export", 1, &node, true).unwrap();
    let lines = refused(&t, &allowed());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        has(
            &lines,
            "(namespace 1 of nvme0) is exported by the kernel's NVMe target: nvmet subsystem \
                     `nqn.2026-12.io.example:export` namespace 1"
        ) && has(&lines, "enabled): take it out first"),
        "{lines:?}"
    );
}

#[test]
fn a_file_on_the_drive_backing_an_lio_backstore_is_refused() {
    let (_dir, mut t) = drive();
    t.module("target_core_mod").unwrap();
    let file = t.file_on("nvme0n1p1", "srv/lun0.img").unwrap();
    t.lio_backstore("fileio_0", "lun0", &file).unwrap();
    let lines = refused(&t, &allowed());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(has(&lines, "backs the LIO SCSI target's backstore fileio_0/lun0"), "{lines:?}");
}

#[test]
fn a_loaded_target_whose_configfs_cannot_be_read_fails_closed() {
    let (_dir, mut t) = drive();
    t.module("nvmet").unwrap();
    let lines = refused(&t, &allowed());
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        has(&lines, "the kernel's NVMe target (nvmet) is loaded but ") && has(&lines, "mount configfs"),
        "{lines:?}"
    );
    // An export of another disk is not the drive's.
    let (_dir, mut t) = drive();
    t.module("nvmet").unwrap();
    let sda = t.node("sda");
    t.nvmet_namespace("nqn.2026-12.io.example:other", 1, &sda, true).unwrap();
    let cases = [case("namespaces", "create", true)];
    let refs: Vec<&ExpandedCase> = cases.iter().collect();
    assert!(matches!(gate(&t.host(), &t.node("nvme0"), &refs, &allowed()), Ok(Some(_))));
}

#[test]
fn only_a_pcie_controller_reports_a_pci_function() {
    let (_dir, t) = drive();
    let details = nvtest::safety::pci_details(&t.host(), &t.node("nvme0"));
    let get = |d: &[(String, String)], k: &str| d.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
    assert_eq!(get(&details, "transport").as_deref(), Some("pcie"));
    assert_eq!(get(&details, "address").as_deref(), Some("0000:00:04.0"), "{details:?}");
    // A fabrics controller: its `device` link is the fabrics class device, no address.
    t.set_transport(0, "tcp").unwrap();
    let details = nvtest::safety::pci_details(&t.host(), &t.node("nvme0"));
    assert_eq!(details, vec![("transport".to_string(), "tcp".to_string())]);
}
