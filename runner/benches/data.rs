//! Benchmark of data judgement: tagged fill ([`fill_blocks`]) and verify ([`judge_range`])
//! throughput next to plain memset and read-sum bandwidth, measured on the same buffer in
//! the same run, for 512 B and 4 KiB blocks. Two buffer sizes show both regimes: 64 MiB
//! (larger than the caches, like a verify sweep's I/O) and 256 KiB (cache-resident).
//!
//! `cargo bench -p nvtest --bench data`; the figure per cell is the best of many short
//! samples (each at least one pass and 2 ms), which keeps it steady on a shared machine.

use std::hint::black_box;
use std::time::{Duration, Instant};

use nvtest::data::{fill_blocks, judge_range, BlockSize, BlockTag, DeallocatedRead, HostMap};

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

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let mut rows = Vec::new();
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
}
