//! The hot path allocates nothing: once a queue has run a few commands, submitting,
//! ringing, executing in the simulated drive (PRP walk and data copy included) and
//! reaping 4 KiB reads makes no heap allocation on the host or in the engine.

mod engine_support;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

use engine_support::*;
use nvme::driver::{Options, Transfer};
use nvme::spec::NvmOpcode;
use nvme_sim::pci::ControllerConfig;

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(|c| c.get()) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn steady_state_reads_at_queue_depth_32_allocate_nothing() {
    let options = Options { io_queue_depth: 64, ..Default::default() };
    let (mut ctrl, _) = driver(ControllerConfig::default(), options);
    let mut q = ctrl.queue(1).unwrap();
    let mut failures = 0;
    let mut round = |q: &mut nvme::driver::IoQueuePair<'_>, base: u64| {
        for i in 0..32u64 {
            q.submit(rw(NvmOpcode::Read, (base + i * 8) % (BLOCKS as u64 - 8), 8), Transfer::FromDevice(4096)).unwrap();
        }
        q.ring().unwrap();
        q.wait(32, |r| failures += !r.completion.status().is_success() as usize).unwrap();
    };
    for warm in 0..4 {
        round(&mut q, warm * 256);
    }
    COUNTING.with(|c| c.set(true));
    for n in 0..300 {
        round(&mut q, n * 256);
    }
    COUNTING.with(|c| c.set(false));
    assert_eq!(failures, 0);
    assert_eq!(ALLOCATIONS.load(Ordering::Relaxed), 0, "heap allocations during 9600 reads");
}
