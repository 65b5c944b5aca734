//! Benchmark of data judgement: tagged fill ([`fill_blocks`]) and verify ([`judge_range`])
//! throughput next to plain memset and read-sum bandwidth, measured on the same buffer in
//! the same run, for 512 B and 4 KiB blocks. Two buffer sizes show both regimes: 64 MiB
//! (larger than the caches, like a verify sweep's I/O) and 256 KiB (cache-resident).
//!
//! A second table puts the power-fail verification after a cycle ([`verify`]: a ledger of
//! the cycle's writes over one block in eight) next to `judge_range` on the same buffer
//! (goal ≥ 1.0×), twice: with the reads lent where they landed (a device's DMA: no CPU
//! copy, like for like with `judge_range`), and with each read copied out first (as the
//! step's reads through the driver are, out of its DMA memory).
//!
//! `cargo bench -p nvtest --bench data`; the figure per cell is the best of many short
//! samples (each at least one pass and 2 ms), which keeps it steady on a shared machine.

use std::hint::black_box;
use std::time::{Duration, Instant};

use nvtest::data::{fill_blocks, judge_range, BlockSize, BlockTag, DeallocatedRead, HostMap};
use nvtest::load::{Change, Journal, WriteRecord};
use nvtest::power::verify::{copied, BlockSource};
use nvtest::power::{verify, Broken, Ledger, Range, Survival};

const SAMPLES: usize = 60;
const SAMPLE_TIME: Duration = Duration::from_millis(2);
const NSID: u32 = 1;
const FIRST_LBA: u64 = 0x1000;
const GENERATION: u64 = 3;
const SEED: u64 = 0x5eed;
const PAGE: usize = 4096;

/// One sample of `pass`: repeated for at least one pass and `SAMPLE_TIME`, in GB/s
/// (10^9 bytes per second).
fn sample(buf: &mut [u8], pass: &mut Pass) -> f64 {
    let start = Instant::now();
    let mut passes = 0u32;
    while passes == 0 || start.elapsed() < SAMPLE_TIME {
        pass(buf);
        passes += 1;
    }
    buf.len() as f64 * f64::from(passes) / start.elapsed().as_secs_f64() / 1e9
}

/// A pass over the whole buffer.
type Pass<'a> = dyn FnMut(&mut [u8]) + 'a;

/// The best rate of each pass over `buf`; the passes take turns, sample by sample, so
/// that all see the same machine (other processes, clock speed).
fn best_rates<const N: usize>(buf: &mut [u8], mut passes: [&mut Pass; N]) -> [f64; N] {
    let mut best = [0f64; N];
    for pass in passes.iter_mut() {
        pass(buf);
    }
    for _ in 0..SAMPLES {
        for (pass, best) in passes.iter_mut().zip(best.iter_mut()) {
            *best = best.max(sample(buf, *pass));
        }
    }
    best
}

fn memset(buf: &mut [u8]) {
    buf.fill(black_box(0xa5));
    black_box(buf);
}

/// Sums the buffer as u64s, eight running sums (one per word of a 64-byte line) so that
/// the loop is bound by memory, not by the latency of one chain of additions.
fn read_sum(buf: &[u8]) {
    let mut sums = [0u64; 8];
    for line in buf.as_chunks::<64>().0 {
        for (sum, word) in sums.iter_mut().zip(line.as_chunks::<8>().0) {
            *sum = sum.wrapping_add(u64::from_le_bytes(*word));
        }
    }
    black_box(sums.iter().fold(0u64, |total, sum| total.wrapping_add(*sum)));
}

struct Row {
    buffer: &'static str,
    block: u32,
    memset: f64,
    fill: f64,
    read_sum: f64,
    judge: f64,
}

fn measure(buffer: &'static str, buf: &mut [u8], block: u32) -> Result<Row, String> {
    let block_size = BlockSize::new(block).map_err(|e| e.to_string())?;
    let blocks = block_size.blocks_in(buf.len()).map_err(|e| e.to_string())?;
    let first = BlockTag { nsid: NSID, lba: FIRST_LBA, generation: GENERATION, seed: SEED, block_size };
    let mut map = HostMap::new();
    map.record_write(NSID, FIRST_LBA, blocks, GENERATION, SEED);
    fill_blocks(buf, &first).map_err(|e| e.to_string())?;
    // The buffer now holds the blocks the map records: judging must accept every one.
    judge_range(buf, NSID, FIRST_LBA, block_size, &map, DeallocatedRead::Zeroes).map_err(|e| e.to_string())?;
    let [read_sum_rate, judge] = best_rates(
        buf,
        [&mut |buf| read_sum(black_box(buf)), &mut |buf| {
            let verdict = judge_range(black_box(buf), NSID, FIRST_LBA, block_size, &map, DeallocatedRead::Zeroes);
            black_box(verdict.is_ok());
        }],
    );
    let mut fill_failed = None;
    let [memset_rate, fill] = best_rates(
        buf,
        [&mut |buf| memset(buf), &mut |buf| {
            if let Err(e) = fill_blocks(black_box(&mut *buf), black_box(&first)) {
                fill_failed = Some(e.to_string());
            }
            black_box(buf);
        }],
    );
    if let Some(e) = fill_failed {
        return Err(e);
    }
    Ok(Row { buffer, block, memset: memset_rate, fill, read_sum: read_sum_rate, judge })
}

/// Blocks per write of the cycle in the verification row, and how far apart the writes are.
const WRITE_BLOCKS: u64 = 8;
const WRITE_EVERY: u64 = 64;

/// A "device" whose reads land in memory: each read lends the blocks where they are.
struct Landed<'a> {
    device: &'a [u8],
    block_bytes: usize,
}

impl BlockSource<String> for Landed<'_> {
    fn read(&mut self, _: u32, lba: u64, _: u64, bytes: usize) -> Result<&[u8], String> {
        let at = (lba - FIRST_LBA) as usize * self.block_bytes;
        self.device.get(at..at + bytes).ok_or_else(|| format!("LBA {lba:#x} is outside the device"))
    }
}

/// The verification after a cycle with lent and with copied reads, and `judge_range`, on
/// `buf` (GB/s of blocks judged).
fn measure_verify(buf: &mut [u8], block: u32) -> Result<(f64, f64, f64), String> {
    let block_size = BlockSize::new(block).map_err(|e| e.to_string())?;
    let blocks = block_size.blocks_in(buf.len()).map_err(|e| e.to_string())?;
    let mut floor = HostMap::new();
    floor.record_write(NSID, FIRST_LBA, blocks, GENERATION, SEED);
    fill_blocks(buf, &BlockTag { nsid: NSID, lba: FIRST_LBA, generation: GENERATION, seed: SEED, block_size })
        .map_err(|e| e.to_string())?;
    // The cycle: a write of 8 blocks in every 64, completed, not durable; half of them
    // reached the media (the buffer holds their data), half were lost.
    let cycle_seed = SEED + 1;
    let mut ledger = Ledger::default();
    let bs = block_size.bytes();
    for (i, lba) in (FIRST_LBA..FIRST_LBA + blocks).step_by(WRITE_EVERY as usize).enumerate() {
        let n = WRITE_BLOCKS.min(FIRST_LBA + blocks - lba);
        let generation = GENERATION + 1 + i as u64;
        let w = WriteRecord {
            nsid: NSID,
            first_lba: lba,
            blocks: n,
            generation,
            change: Change::Write,
            fua: false,
            submitted_ns: 0,
        };
        ledger.submitted(&w);
        ledger.completed(&w, 1, true);
        if i % 2 == 0 {
            let at = (lba - FIRST_LBA) as usize * bs;
            let tag = BlockTag { nsid: NSID, lba, generation, seed: cycle_seed, block_size };
            fill_blocks(&mut buf[at..at + n as usize * bs], &tag).map_err(|e| e.to_string())?;
        }
    }
    let ranges = [Range {
        nsid: NSID,
        first_lba: FIRST_LBA,
        blocks,
        block_size,
        dealloc: DeallocatedRead::Zeroes,
        atomic_blocks: 8,
    }];
    let run = |device: &[u8], copy: bool| {
        let mut map = floor.clone();
        let mut read = |_: u32, lba: u64, n: u64, out: &mut [u8]| -> Result<(), String> {
            let at = (lba - FIRST_LBA) as usize * bs;
            out.copy_from_slice(&device[at..at + n as usize * bs]);
            Ok(())
        };
        let mut copying = copied(&mut read);
        let mut landed = Landed { device, block_bytes: bs };
        let source: &mut dyn BlockSource<String> = if copy { &mut copying } else { &mut landed };
        verify(Broken::Integrity, &ranges, &ledger, &Survival::Flushed, &floor, &mut map, cycle_seed, 256, source)
    };
    for copy in [false, true] {
        let first = run(buf, copy)?;
        if !first.findings.is_empty() || first.blocks_judged != blocks {
            return Err(format!(
                "the verification found {:?} in {} blocks",
                first.findings.first(),
                first.blocks_judged
            ));
        }
    }
    let [lent, copied_rate, judge] = best_rates(
        buf,
        [
            &mut |buf| {
                black_box(run(black_box(buf), false).map(|v| v.blocks_judged).ok());
            },
            &mut |buf| {
                black_box(run(black_box(buf), true).map(|v| v.blocks_judged).ok());
            },
            &mut |buf| {
                let verdict = judge_range(black_box(buf), NSID, FIRST_LBA, block_size, &floor, DeallocatedRead::Zeroes);
                black_box(verdict.is_ok());
            },
        ],
    );
    Ok((lent, copied_rate, judge))
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let mut rows = Vec::new();
    let mut verify_rows = Vec::new();
    for (buffer, bytes) in [("64 MiB", 64usize << 20), ("256 KiB", 256 << 10)] {
        // Page-aligned, as DMA buffers are.
        let mut storage = vec![0u8; bytes + PAGE];
        let offset = storage.as_ptr().align_offset(PAGE);
        let buf = &mut storage[offset..offset + bytes];
        for block in [512, 4096] {
            match measure(buffer, buf, block) {
                Ok(row) => rows.push(row),
                Err(e) => {
                    eprintln!("{buffer} buffer, {block} B blocks: {e}");
                    std::process::exit(1);
                }
            }
            match measure_verify(buf, block) {
                Ok((lent, copied, judge)) => verify_rows.push((buffer, block, lent, copied, judge)),
                Err(e) => {
                    eprintln!("{buffer} buffer, {block} B blocks, power-fail verification: {e}");
                    std::process::exit(1);
                }
            }
        }
    }
    println!("data judgement throughput, GB/s (best of {SAMPLES} samples of >= {} ms)", SAMPLE_TIME.as_millis());
    println!(
        "{:>8} {:>6} | {:>7} {:>7} {:>6} | {:>8} {:>7} {:>6}",
        "buffer", "block", "memset", "fill", "ratio", "read-sum", "judge", "ratio"
    );
    for row in &rows {
        println!(
            "{:>8} {:>6} | {:>7.2} {:>7.2} {:>5.0}% | {:>8.2} {:>7.2} {:>5.0}%",
            row.buffer,
            format!("{} B", row.block),
            row.memset,
            row.fill,
            100.0 * row.fill / row.memset,
            row.read_sum,
            row.judge,
            100.0 * row.judge / row.read_sum,
        );
    }
    println!();
    println!(
        "power-fail verification after a cycle (1 block in {} written, half lost), GB/s, next to judge_range",
        WRITE_EVERY / WRITE_BLOCKS
    );
    println!(
        "{:>8} {:>6} | {:>7} {:>7} {:>6} | {:>7} {:>6}",
        "buffer", "block", "judge", "verify", "ratio", "copied", "ratio"
    );
    for (buffer, block, lent, copied, judge) in &verify_rows {
        println!(
            "{:>8} {:>6} | {:>7.2} {:>7.2} {:>5.2}x | {:>7.2} {:>5.2}x",
            buffer,
            format!("{block} B"),
            judge,
            lent,
            lent / judge,
            copied,
            copied / judge
        );
    }
}
