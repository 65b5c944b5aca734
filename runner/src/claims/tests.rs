use super::*;

const FULL: &str = "\
# claims of a drive, from its datasheet
drive: PBlaze5 916 (datasheet 2019)
read_qos:
  - name: mixed
    read_iops: 50000
    block: 4 KiB
    queue_depth: 32
    background_write: 500 MB/s
    percentile: 99.9
    latency: 0.12 ms
  - read_iops: 1000
    percentile: 50
    latency: 80 us
ready_time: 5 s
power_loss_protection: true
crypto_erase: true
namespaces: {max: 32, lba_sizes: [512, 4096]}
firmware_activation_without_reset: false
dual_port: true
hot_plug: true
arbitration: {weighted_round_robin: true, urgent: true}
";

fn load(text: &str) -> Claims {
    parse_claims(text, "claims.yaml").unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> String {
    let e = parse_claims(text, "claims.yaml").expect_err("should not load").to_string();
    assert!(!e.contains('\n'), "error over several lines: {e:?}");
    e
}

fn at<T: Clone>(c: &Option<Claimed<T>>) -> (T, u64, u64) {
    let c = c.as_ref().expect("claimed");
    (c.value.clone(), c.line, c.column)
}

#[test]
fn every_claim_loads_with_its_value_and_location() {
    let c = load(FULL);
    assert_eq!((c.origin.as_str(), c.drive.as_str()), ("claims.yaml", "PBlaze5 916 (datasheet 2019)"));
    assert_eq!(c.read_qos.len(), 2);
    let mixed = &c.read_qos[0];
    assert_eq!((mixed.line, mixed.column), (4, 5));
    assert_eq!(
        mixed.value,
        ReadQos {
            name: Some("mixed".into()),
            read_iops: 50_000,
            block_bytes: 4096,
            queue_depth: Some(32),
            background_write_bytes_per_s: 500_000_000,
            percentile: 99.9,
            latency: Duration::from_micros(120),
        }
    );
    let plain = &c.read_qos[1];
    assert_eq!((plain.line, plain.column), (11, 5));
    assert_eq!(
        plain.value,
        ReadQos {
            name: None,
            read_iops: 1000,
            block_bytes: DEFAULT_BLOCK_BYTES,
            queue_depth: None,
            background_write_bytes_per_s: 0,
            percentile: 50.0,
            latency: Duration::from_micros(80),
        }
    );
    assert_eq!(at(&c.ready_time), (Duration::from_secs(5), 14, 13));
    assert_eq!(at(&c.power_loss_protection), (true, 15, 24));
    assert_eq!(at(&c.crypto_erase), (true, 16, 15));
    assert_eq!(at(&c.namespaces), (NamespaceClaim { max: 32, lba_sizes: vec![512, 4096] }, 17, 13));
    assert_eq!(at(&c.firmware_activation_without_reset), (false, 18, 36));
    assert_eq!(at(&c.dual_port), (true, 19, 12));
    assert_eq!(at(&c.hot_plug), (true, 20, 11));
    assert_eq!(at(&c.arbitration), (ArbitrationClaim { weighted_round_robin: true, urgent: true }, 21, 14));
    assert!(!c.is_empty());
}

#[test]
fn only_drive_is_required() {
    let c = load("drive: d\n");
    assert!(c.is_empty());
    assert_eq!(c.read_qos, vec![]);
    assert_eq!((c.ready_time, c.namespaces, c.arbitration), (None, None, None));
    let c = load("drive: d\narbitration: {urgent: true}\nnamespaces: {max: 4}\n");
    assert_eq!(c.arbitration.unwrap().value, ArbitrationClaim { weighted_round_robin: false, urgent: true });
    assert_eq!(c.namespaces.unwrap().value, NamespaceClaim { max: 4, lba_sizes: vec![] });
}

#[test]
fn a_read_qos_block_and_background_write_take_units_or_plain_numbers() {
    let q = |fields: &str| {
        load(&format!("drive: d\nread_qos:\n  - {{read_iops: 1, percentile: 99, latency: 1 ms, {fields}}}\n")).read_qos
            [0]
        .value
        .clone()
    };
    assert_eq!(q("block: 4096").block_bytes, 4096);
    assert_eq!(q("block: 512 B").block_bytes, 512);
    assert_eq!(q("block: 128 KiB").block_bytes, 128 << 10);
    assert_eq!(q("background_write: 0").background_write_bytes_per_s, 0);
    assert_eq!(q("background_write: none").background_write_bytes_per_s, 0);
    assert_eq!(q("background_write: 1.5 GB/s").background_write_bytes_per_s, 1_500_000_000);
    assert_eq!(q("background_write: 200 MiB/s").background_write_bytes_per_s, 200 << 20);
}

#[test]
fn durations_parse_in_every_unit() {
    let ok = |t: &str| parse_duration(t).unwrap_or_else(|e| panic!("{t}: {e}"));
    assert_eq!(ok("120 us"), Duration::from_micros(120));
    assert_eq!(ok("120 µs"), Duration::from_micros(120));
    assert_eq!(ok("120 μs"), Duration::from_micros(120));
    assert_eq!(ok("0.12 ms"), Duration::from_micros(120));
    assert_eq!(ok("120us"), Duration::from_micros(120));
    assert_eq!(ok("5 s"), Duration::from_secs(5));
    assert_eq!(ok("1.5 s"), Duration::from_millis(1500));
    assert_eq!(ok("200 ns"), Duration::from_nanos(200));
    assert_eq!(ok("0"), Duration::ZERO);
    assert_eq!(ok("0.0 ms"), Duration::ZERO);
    assert_eq!(ok("0.000001 ms"), Duration::from_nanos(1));
}

#[test]
fn bad_durations_say_what_is_allowed() {
    let e = |t: &str| parse_duration(t).unwrap_err();
    let units = "write a number and a unit (ns, us, µs, ms, s), e.g. `120 us` or `0.12 ms`";
    assert_eq!(e("5 min"), format!("`5 min` is not a duration; {units}"));
    assert_eq!(e("fast"), format!("`fast` is not a duration; {units}"));
    assert_eq!(e("-1 ms"), format!("`-1 ms` is not a duration; {units}"));
    assert_eq!(e("1..2 ms"), format!("`1..2 ms` is not a duration; {units}"));
    assert_eq!(e(".5 ms"), format!("`.5 ms` is not a duration; {units}"));
    assert_eq!(e("5. ms"), format!("`5. ms` is not a duration; {units}"));
    assert_eq!(e("120"), format!("`120` has no unit; {units}"));
    assert_eq!(e("0.5 ns"), format!("`0.5 ns` is not a whole number of nanoseconds; {units}"));
    assert_eq!(
        e("0.00000000000000000001 s"),
        format!("`0.00000000000000000001 s` is not a whole number of nanoseconds; {units}")
    );
    assert_eq!(e("99999999999 s"), "`99999999999 s` is too large for a duration");
    assert_eq!(
        e("999999999999999999999999999999999999999999 ns"),
        "`999999999999999999999999999999999999999999 ns` is too large for a duration"
    );
}

#[test]
fn rates_parse_in_decimal_and_binary_units() {
    let ok = |t: &str| parse_rate(t).unwrap_or_else(|e| panic!("{t}: {e}"));
    assert_eq!(ok("500 MB/s"), 500_000_000);
    assert_eq!(ok("1.5 GB/s"), 1_500_000_000);
    assert_eq!(ok("200 MiB/s"), 200 << 20);
    assert_eq!(ok("1 GiB/s"), 1 << 30);
    assert_eq!(ok("3 KiB/s"), 3 << 10);
    assert_eq!(ok("3 kB/s"), 3000);
    assert_eq!(ok("3 KB/s"), 3000);
    assert_eq!(ok("7 B/s"), 7);
    assert_eq!(ok("0"), 0);
    assert_eq!(ok("none"), 0);
    assert_eq!(ok("0.5 KiB/s"), 512);
}

#[test]
fn bad_rates_say_what_is_allowed() {
    let e = |t: &str| parse_rate(t).unwrap_err();
    let units =
        "write a number and a unit (B/s, kB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s), e.g. `500 MB/s`, or 0 or `none`";
    assert_eq!(e("500 MB"), format!("`500 MB` is not a rate; {units}"));
    assert_eq!(e("500 mb/s"), format!("`500 mb/s` is not a rate; {units}"));
    assert_eq!(e("500"), format!("`500` has no unit; {units}"));
    assert_eq!(e("0.3 KiB/s"), format!("`0.3 KiB/s` is not a whole number of bytes per second; {units}"));
    assert_eq!(e("99999999999 GB/s"), "`99999999999 GB/s` is too large for a rate");
}

#[test]
fn quantities_are_shown_in_the_largest_fitting_unit() {
    assert_eq!(show_duration(Duration::from_micros(120)), "120 µs");
    assert_eq!(show_duration(Duration::from_secs(5)), "5 s");
    assert_eq!(show_duration(Duration::from_micros(1500)), "1.5 ms");
    assert_eq!(show_duration(Duration::from_nanos(200)), "200 ns");
    assert_eq!(show_duration(Duration::from_nanos(1_000_001)), "1000.001 µs");
    assert_eq!(show_duration(Duration::ZERO), "0 ns");
    assert_eq!(show_rate(500_000_000), "500 MB/s");
    assert_eq!(show_rate(1_500_000_000), "1.5 GB/s");
    assert_eq!(show_rate(200 << 20), "200 MiB/s");
    assert_eq!(show_rate(1 << 30), "1 GiB/s");
    assert_eq!(show_rate(7), "7 B/s");
    assert_eq!(show_size(4096), "4 KiB");
    assert_eq!(show_size(512), "512 B");
    assert_eq!(show_size(1536), "1536 B");
}

#[test]
fn a_claim_is_cited_by_file_line_column_and_what_it_says() {
    let c = load(FULL);
    assert_eq!(
        c.cite_read_qos(&c.read_qos[0]),
        "claims.yaml:4:5 (read_qos `mixed`: p99.9 ≤ 120 µs at 50000 read IOPS of 4 KiB, queue depth 32, 500 MB/s background write)"
    );
    assert_eq!(
        c.cite_read_qos(&c.read_qos[1]),
        "claims.yaml:11:5 (read_qos: p50 ≤ 80 µs at 1000 read IOPS of 4 KiB, no background write)"
    );
    assert_eq!(c.cite(c.ready_time.as_ref().unwrap(), "ready_time: 5 s"), "claims.yaml:14:13 (ready_time: 5 s)");
}

#[test]
fn semantic_mistakes_are_located_at_the_value() {
    let qos = |fields: &str| format!("drive: d\nread_qos:\n  - {fields}\n");
    assert_eq!(
        err(&qos("{read_iops: 1000, percentile: 100, latency: 1 ms}")),
        "claims.yaml:3:35: percentile 100 is not between 0 and 100 (exclusive); write e.g. 99.9"
    );
    assert_eq!(
        err(&qos("{read_iops: 1000, percentile: 0, latency: 1 ms}")),
        "claims.yaml:3:35: percentile 0 is not between 0 and 100 (exclusive); write e.g. 99.9"
    );
    assert_eq!(
        err(&qos("{read_iops: 1000, percentile: .nan, latency: 1 ms}")),
        "claims.yaml:3:35: value `.nan` is not a finite number"
    );
    assert_eq!(
        err(&qos("{read_iops: 0, percentile: 99, latency: 1 ms}")),
        "claims.yaml:3:17: read_iops 0 is not a load; give the read IOPS the promise holds at, e.g. 50000"
    );
    assert_eq!(
        err(&qos("{read_iops: 1, percentile: 99, latency: 0 us}")),
        "claims.yaml:3:45: latency 0 is not a bound (every read takes time); give the bound, e.g. 120 us"
    );
    assert_eq!(
        err(&qos("{read_iops: 1, percentile: 99, latency: 0}")),
        "claims.yaml:3:45: latency 0 is not a bound (every read takes time); give the bound, e.g. 120 us"
    );
    assert_eq!(
        err(&qos("{read_iops: 1, percentile: 99, latency: 5 min}")),
        "claims.yaml:3:45: latency `5 min` is not a duration; write a number and a unit (ns, us, µs, ms, s), e.g. `120 us` or `0.12 ms`"
    );
    assert_eq!(
        err(&qos("{read_iops: 1, percentile: 99, latency: 1 ms, background_write: 5 MB}")),
        "claims.yaml:3:69: background_write `5 MB` is not a rate; write a number and a unit (B/s, kB/s, MB/s, GB/s, KiB/s, MiB/s, GiB/s), e.g. `500 MB/s`, or 0 or `none`"
    );
    assert_eq!(
        err(&qos("{read_iops: 1, percentile: 99, latency: 1 ms, block: 4 KB}")),
        "claims.yaml:3:58: block `4 KB` is not a size; write bytes (4096) or a number with B, KiB or MiB (4 KiB)"
    );
    assert_eq!(
        err(&qos("{read_iops: 1, percentile: 99, latency: 1 ms, block: 1000}")),
        "claims.yaml:3:58: block 1000 bytes is not a read size; a read is whole 512-byte units (512 B, 4 KiB, 128 KiB) below 4 GiB"
    );
    assert_eq!(
        err(&qos("{read_iops: 1, percentile: 99, latency: 1 ms, block: 0}")),
        "claims.yaml:3:58: block 0 bytes is not a read size; a read is whole 512-byte units (512 B, 4 KiB, 128 KiB) below 4 GiB"
    );
    assert_eq!(
        err(&qos("{read_iops: 1, percentile: 99, latency: 1 ms, queue_depth: 0}")),
        "claims.yaml:3:64: queue_depth 0; at least one read is outstanding (1 or more)"
    );
    assert_eq!(
        err("drive: d\nread_qos:\n  - {name: a, read_iops: 1, percentile: 99, latency: 1 ms}\n  - {name: a, read_iops: 2, percentile: 99, latency: 1 ms}\n"),
        "claims.yaml:4:12: read_qos name `a` is used twice; each promise's name is unique in the file"
    );
    assert_eq!(
        err("drive: d\nread_qos:\n  - {name: ' ', read_iops: 1, percentile: 99, latency: 1 ms}\n"),
        "claims.yaml:3:12: name is empty; leave it out or give the promise a name"
    );
    assert_eq!(
        err("drive: d\nnamespaces: {max: 0}\n"),
        "claims.yaml:2:19: namespaces max 0 is not a count; a drive supports at least 1 namespace (NN)"
    );
    assert_eq!(
        err("drive: d\nnamespaces: {max: 2, lba_sizes: [512, 1000]}\n"),
        "claims.yaml:2:39: lba size 1000 is not an LBA data size; a power of two from 512 to 65536 (512, 4096)"
    );
    assert_eq!(
        err("drive: d\nnamespaces: {max: 2, lba_sizes: [256]}\n"),
        "claims.yaml:2:34: lba size 256 is not an LBA data size; a power of two from 512 to 65536 (512, 4096)"
    );
    assert_eq!(
        err("drive: d\nnamespaces: {max: 2, lba_sizes: [131072]}\n"),
        "claims.yaml:2:34: lba size 131072 is not an LBA data size; a power of two from 512 to 65536 (512, 4096)"
    );
    assert_eq!(
        err("drive: d\nnamespaces: {max: 2, lba_sizes: [512, 512]}\n"),
        "claims.yaml:2:39: lba size 512 is listed twice"
    );
    assert_eq!(
        err("drive: '  '\n"),
        "claims.yaml:1:8: drive is empty; say what the claims are of, e.g. `PBlaze5 916 (datasheet 2019)`"
    );
    assert_eq!(
        err("drive: d\nready_time: 5 minutes\n"),
        "claims.yaml:2:13: ready_time `5 minutes` is not a duration; write a number and a unit (ns, us, µs, ms, s), e.g. `120 us` or `0.12 ms`"
    );
}

#[test]
fn file_mistakes_are_located_and_say_what_is_allowed() {
    let e = err("drive: d\nspeed: fast\n");
    assert!(
        e.starts_with("claims.yaml:2:1: unknown key `speed`; allowed here: drive, model, read_qos, ready_time"),
        "{e}"
    );
    assert_eq!(
        err("drive: d\nread_qos:\n  - {read_iops: \"50000\", percentile: 99, latency: 1 ms}\n"),
        "claims.yaml:3:17: \"50000\" is quoted text; a whole number (u64) is written without quotes: 50000"
    );
    assert_eq!(
        err("drive: d\ncrypto_erase: \"true\"\n"),
        "claims.yaml:2:15: \"true\" is quoted text; true or false is written without quotes: true"
    );
    assert_eq!(
        err("drive: d\nread_qos: 5\n"),
        "claims.yaml:2:11: expected a list here (`[a, b]` or lines starting with `- `)"
    );
    let e = err("read_qos: []\n");
    assert!(e.starts_with("claims.yaml:1:1: missing key `drive`"), "{e}");
    let e = err("drive: d\ndrive: e\n");
    assert!(e.starts_with("claims.yaml:2:1: duplicate key `drive`"), "{e}");
    // A quoted value over several lines is shown on one line.
    let e = err("drive: d\nread_qos:\n  - {read_iops: 1, percentile: 99, latency: \"5\n\n min\"}\n");
    assert!(e.starts_with("claims.yaml:3:45: latency `5\\nmin` is not a duration"), "{e}");
}

#[test]
fn an_empty_file_says_a_drive_is_needed() {
    for text in ["", "# only a comment\n"] {
        let e = err(text);
        assert!(e.starts_with("claims.yaml:"), "{e}");
        assert!(e.contains("drive"), "{e}");
    }
}

#[test]
fn a_file_that_cannot_be_read_is_named() {
    let e = load_claims(Path::new("/nonexistent/claims.yaml")).unwrap_err().to_string();
    assert!(e.starts_with("/nonexistent/claims.yaml: cannot read the claims: "), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.yaml");
    std::fs::write(&path, "drive: d\nhot_plug: true\n").unwrap();
    let c = load_claims(&path).unwrap();
    assert_eq!(c.origin, path.display().to_string());
    assert_eq!(at(&c.hot_plug), (true, 2, 11));
}

#[test]
fn a_profile_carries_its_claims_located_in_the_profile() {
    let profile = "name: p\nquirks: []\nclaims:\n  drive: d\n  dual_port: true\n";
    let c = claims_of_profile(profile, "p.yaml").unwrap().unwrap();
    assert_eq!((c.origin.as_str(), c.drive.as_str()), ("p.yaml", "d"));
    assert_eq!(at(&c.dual_port), (true, 5, 14));
    assert_eq!(claims_of_profile("name: p\n", "p.yaml").unwrap(), None);
    assert_eq!(
        claims_of_profile("name: p\nclaims:\n  drive: d\n  dual_port: yes\n", "p.yaml").unwrap_err().to_string(),
        "p.yaml:4:14: `yes` is text; expected true or false"
    );
}
