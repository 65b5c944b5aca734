//! The command slots of the io_uring passthrough queues ([`super::uring`]): which slot of
//! which logical queue a command is in, its buffers, and its life (free, in flight,
//! completed and waiting to be handed back, given up on). No system call happens here,
//! so the bookkeeping is tested without a device.
//!
//! A slot's index is the tag the queue hands out as the command's CID, and the CID of
//! the [`crate::spec::Completion`] it hands back. Each use of a slot has a generation;
//! the io_uring `user_data` of a command carries queue, slot and generation, so a
//! completion that arrives after its command was given up on ([`Slots::expire`]) frees
//! that slot and nothing else: a given-up slot is not reused before its completion came.

use std::alloc::{self, Layout};
use std::collections::VecDeque;

use crate::device::DeviceError;
use crate::spec::Completion;

/// Alignment of the slot buffers: a page, so the kernel maps them for DMA directly
/// (an unaligned user buffer is copied through a bounce buffer by the block layer).
pub const BUFFER_ALIGN: usize = 4096;

/// A zeroed, page-aligned heap buffer the kernel may write into by DMA.
pub struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
}

impl AlignedBuf {
    /// A buffer of `len` bytes (`len` > 0).
    pub fn new(len: usize) -> Result<AlignedBuf, DeviceError> {
        let layout = Layout::from_size_align(len.max(1), BUFFER_ALIGN)
            .map_err(|e| DeviceError::Driver(format!("a {len}-byte I/O buffer: {e}")))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(DeviceError::Driver(format!("cannot allocate a {len}-byte I/O buffer")));
        }
        Ok(AlignedBuf { ptr, len: len.max(1) })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn addr(&self) -> u64 {
        self.ptr as u64
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is a live allocation of `len` initialised (zeroed) bytes.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, borrowed exclusively.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this very layout (which was valid then).
        unsafe { alloc::dealloc(self.ptr, Layout::from_size_align_unchecked(self.len, BUFFER_ALIGN)) }
    }
}

/// One direction's buffer of a slot: kept between commands, grown when a command needs
/// more.
#[derive(Default)]
pub struct SlotBuffer {
    buf: Option<AlignedBuf>,
    /// Bytes of the command in the slot.
    pub len: usize,
    /// Whether the controller writes them (handed back on completion).
    pub from_device: bool,
}

impl SlotBuffer {
    /// Makes room for `len` bytes (none when 0), fills it with `bytes` when given, and
    /// returns the address the command carries (0 without data).
    pub fn stage(&mut self, len: usize, bytes: Option<&[u8]>, from_device: bool) -> Result<u64, DeviceError> {
        self.len = len;
        self.from_device = from_device && len > 0;
        if len == 0 {
            return Ok(0);
        }
        if self.buf.as_ref().is_none_or(|b| b.len() < len) {
            self.buf = Some(AlignedBuf::new(len)?);
        }
        let buf = self.buf.as_mut().expect("allocated above");
        if let Some(bytes) = bytes {
            buf.as_mut_slice()[..len].copy_from_slice(bytes);
        }
        Ok(buf.addr())
    }

    /// What the controller wrote (empty unless it was asked to write).
    pub fn read_back(&self) -> &[u8] {
        match &self.buf {
            Some(b) if self.from_device => &b.as_slice()[..self.len],
            _ => &[],
        }
    }

    /// Gives the allocation up without freeing it: the kernel may still write into it.
    fn leak(&mut self) {
        if let Some(buf) = self.buf.take() {
            std::mem::forget(buf);
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    Free,
    InFlight,
    /// Completed, waiting to be handed back by a poll.
    Completed,
    /// Past its deadline and given up on; freed when (if) its completion arrives.
    Abandoned,
}

/// What a completed command came back with: a completion, or why there is none.
pub type Outcome = Result<Completion, DeviceError>;

/// One command's place.
pub struct Slot {
    pub state: SlotState,
    pub generation: u32,
    pub submitted_ns: u64,
    pub opcode: u8,
    pub nsid: u32,
    pub data: SlotBuffer,
    pub metadata: SlotBuffer,
    pub outcome: Option<Outcome>,
}

impl Slot {
    fn new() -> Slot {
        Slot {
            state: SlotState::Free,
            generation: 0,
            submitted_ns: 0,
            opcode: 0,
            nsid: 0,
            data: SlotBuffer::default(),
            metadata: SlotBuffer::default(),
            outcome: None,
        }
    }
}

/// The slots of one logical queue.
struct Queue {
    slots: Vec<Slot>,
    free: Vec<u16>,
    /// Completed slots in completion order.
    ready: VecDeque<u16>,
    /// Submitted and not yet handed back or given up on.
    outstanding: usize,
}

/// The `user_data` of a command: queue (bits 63:48), slot (47:32), generation (31:0).
pub fn user_data(queue: usize, slot: u16, generation: u32) -> u64 {
    ((queue as u64 & 0xFFFF) << 48) | ((slot as u64) << 32) | generation as u64
}

/// The queue, slot and generation a `user_data` names.
pub fn split_user_data(user_data: u64) -> (usize, u16, u32) {
    ((user_data >> 48) as usize, (user_data >> 32) as u16, user_data as u32)
}

/// The slots of every logical queue.
pub struct Slots {
    queues: Vec<Queue>,
}

impl Slots {
    /// `depths[q]` slots for queue `q` (each at most 65536).
    pub fn new(depths: &[usize]) -> Slots {
        let queues = depths
            .iter()
            .map(|&depth| Queue {
                slots: (0..depth).map(|_| Slot::new()).collect(),
                // Popped from the end: the lowest tag first.
                free: (0..depth as u16).rev().collect(),
                ready: VecDeque::new(),
                outstanding: 0,
            })
            .collect();
        Slots { queues }
    }

    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    pub fn capacity(&self, queue: usize) -> usize {
        self.queues.get(queue).map_or(0, |q| q.slots.len())
    }

    pub fn outstanding(&self, queue: usize) -> usize {
        self.queues.get(queue).map_or(0, |q| q.outstanding)
    }

    /// Commands the kernel still holds (in flight or given up on), over all queues.
    pub fn held_by_kernel(&self) -> usize {
        self.queues
            .iter()
            .flat_map(|q| &q.slots)
            .filter(|s| matches!(s.state, SlotState::InFlight | SlotState::Abandoned))
            .count()
    }

    fn queue(&self, queue: usize) -> Result<&Queue, DeviceError> {
        self.queues.get(queue).ok_or_else(|| DeviceError::Driver(format!("the workload has no queue {queue}")))
    }

    /// A free slot of `queue` for a command, not yet in flight (see [`Self::start`]).
    pub fn take(&mut self, queue: usize) -> Result<u16, DeviceError> {
        let q = self.queue(queue)?;
        let held = q.slots.len() - q.free.len();
        let q = &mut self.queues[queue];
        q.free.pop().ok_or_else(|| {
            DeviceError::Driver(format!(
                "logical queue {queue} has all {} slots taken ({held} in flight, given up on or unread)",
                q.slots.len()
            ))
        })
    }

    /// Returns a slot taken but never started (staging failed).
    pub fn untake(&mut self, queue: usize, slot: u16) {
        self.queues[queue].free.push(slot);
    }

    pub fn slot_mut(&mut self, queue: usize, slot: u16) -> &mut Slot {
        &mut self.queues[queue].slots[slot as usize]
    }

    pub fn slot(&self, queue: usize, slot: u16) -> &Slot {
        &self.queues[queue].slots[slot as usize]
    }

    /// Marks a taken slot in flight from `now_ns`; returns its `user_data`.
    pub fn start(&mut self, queue: usize, slot: u16, opcode: u8, nsid: u32, now_ns: u64) -> u64 {
        let q = &mut self.queues[queue];
        let s = &mut q.slots[slot as usize];
        s.generation = s.generation.wrapping_add(1);
        s.state = SlotState::InFlight;
        s.submitted_ns = now_ns;
        s.opcode = opcode;
        s.nsid = nsid;
        s.outcome = None;
        q.outstanding += 1;
        user_data(queue, slot, s.generation)
    }

    /// Takes a completion from the ring. `false` when it names no command in flight
    /// (a stale generation, an unknown queue or slot): it is then ignored.
    pub fn complete(&mut self, user_data: u64, outcome: Outcome) -> bool {
        let (queue, slot, generation) = split_user_data(user_data);
        let Some(q) = self.queues.get_mut(queue) else { return false };
        let Some(s) = q.slots.get_mut(slot as usize) else { return false };
        if s.generation != generation {
            return false;
        }
        match s.state {
            SlotState::InFlight => {
                s.state = SlotState::Completed;
                s.outcome = Some(outcome);
                q.ready.push_back(slot);
                true
            }
            SlotState::Abandoned => {
                s.state = SlotState::Free;
                q.free.push(slot);
                true
            }
            SlotState::Free | SlotState::Completed => false,
        }
    }

    /// The next completed slot of `queue`, with its outcome; the slot stays taken until
    /// [`Self::release`] (its buffers hold the data read).
    pub fn next_ready(&mut self, queue: usize) -> Option<(u16, Outcome)> {
        let q = self.queues.get_mut(queue)?;
        let slot = q.ready.pop_front()?;
        let outcome = q.slots[slot as usize].outcome.take()?;
        Some((slot, outcome))
    }

    /// Frees a slot handed back by [`Self::next_ready`].
    pub fn release(&mut self, queue: usize, slot: u16) {
        let q = &mut self.queues[queue];
        q.slots[slot as usize].state = SlotState::Free;
        q.outstanding = q.outstanding.saturating_sub(1);
        q.free.push(slot);
    }

    /// The oldest command of `queue` in flight for longer than `timeout_ns`, given up on
    /// (it no longer counts as outstanding; its slot waits for its completion).
    pub fn expire(&mut self, queue: usize, now_ns: u64, timeout_ns: u64) -> Option<u16> {
        let q = self.queues.get_mut(queue)?;
        let (slot, _) = q
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.state == SlotState::InFlight && now_ns.saturating_sub(s.submitted_ns) > timeout_ns)
            .min_by_key(|(_, s)| s.submitted_ns)?;
        q.slots[slot].state = SlotState::Abandoned;
        q.outstanding = q.outstanding.saturating_sub(1);
        Some(slot as u16)
    }

    /// Gives up the buffers of every slot the kernel still holds without freeing them
    /// (when waiting for those commands ran out of time). Returns how many slots.
    pub fn leak_held(&mut self) -> usize {
        let mut n = 0;
        for s in self.queues.iter_mut().flat_map(|q| q.slots.iter_mut()) {
            if matches!(s.state, SlotState::InFlight | SlotState::Abandoned) {
                s.data.leak();
                s.metadata.leak();
                n += 1;
            }
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> Outcome {
        Ok(Completion::default())
    }

    #[test]
    fn user_data_round_trips_queue_slot_and_generation() {
        let ud = user_data(3, 0xBEEF, 0xDEAD_1234);
        assert_eq!(split_user_data(ud), (3, 0xBEEF, 0xDEAD_1234));
    }

    #[test]
    fn tags_are_slot_indices_below_the_depth_lowest_first() {
        let mut slots = Slots::new(&[2, 1]);
        assert_eq!(slots.take(0).unwrap(), 0);
        assert_eq!(slots.take(0).unwrap(), 1);
        let e = slots.take(0).unwrap_err().to_string();
        assert!(e.contains("all 2 slots taken"), "{e}");
        assert_eq!(slots.take(1).unwrap(), 0);
        assert!(slots.take(2).is_err());
        assert_eq!(slots.capacity(0), 2);
        assert_eq!(slots.capacity(1), 1);
    }

    #[test]
    fn a_completion_is_handed_back_once_then_the_slot_is_reused() {
        let mut slots = Slots::new(&[1]);
        let tag = slots.take(0).unwrap();
        let ud = slots.start(0, tag, 2, 1, 100);
        assert_eq!(slots.outstanding(0), 1);
        assert_eq!(slots.held_by_kernel(), 1);
        assert!(slots.complete(ud, ok()));
        assert!(!slots.complete(ud, ok()), "a second completion of the same command is ignored");
        assert_eq!(slots.held_by_kernel(), 0);
        let (got, outcome) = slots.next_ready(0).unwrap();
        assert_eq!(got, tag);
        assert!(outcome.is_ok());
        assert!(slots.next_ready(0).is_none());
        assert_eq!(slots.outstanding(0), 1, "outstanding until released");
        slots.release(0, got);
        assert_eq!(slots.outstanding(0), 0);
        assert_eq!(slots.take(0).unwrap(), tag);
    }

    #[test]
    fn a_given_up_command_keeps_its_slot_until_its_late_completion() {
        let mut slots = Slots::new(&[2]);
        let a = slots.take(0).unwrap();
        let ud_a = slots.start(0, a, 2, 1, 0);
        let b = slots.take(0).unwrap();
        let _ud_b = slots.start(0, b, 2, 1, 50);
        assert_eq!(slots.expire(0, 1_000, 2_000), None, "nothing is past the timeout yet");
        assert_eq!(slots.expire(0, 2_020, 2_000), Some(a), "the oldest first");
        assert_eq!(slots.outstanding(0), 1);
        assert!(slots.take(0).is_err(), "the given-up slot is not free while the kernel holds it");
        assert_eq!(slots.held_by_kernel(), 2);
        // Its late completion frees the slot and hands nothing back.
        assert!(slots.complete(ud_a, ok()));
        assert!(slots.next_ready(0).is_none());
        let again = slots.take(0).unwrap();
        assert_eq!(again, a);
        let ud_again = slots.start(0, again, 2, 1, 3_000);
        assert_ne!(ud_again, ud_a, "a new generation");
        // A stale completion of the old generation does not complete the new command.
        assert!(!slots.complete(ud_a, ok()));
        assert!(slots.next_ready(0).is_none());
        assert!(slots.complete(ud_again, ok()));
        assert_eq!(slots.next_ready(0).map(|(s, _)| s), Some(a));
    }

    #[test]
    fn completions_of_unknown_queues_or_slots_are_ignored() {
        let mut slots = Slots::new(&[1]);
        assert!(!slots.complete(user_data(5, 0, 1), ok()));
        assert!(!slots.complete(user_data(0, 9, 1), ok()));
        assert!(!slots.complete(user_data(0, 0, 1), ok()), "slot 0 is free");
    }

    #[test]
    fn buffers_are_page_aligned_kept_and_read_back_only_from_the_device() {
        let mut b = SlotBuffer::default();
        assert_eq!(b.stage(0, None, true).unwrap(), 0);
        assert!(b.read_back().is_empty());
        let addr = b.stage(4096, Some(&[7u8; 4096]), false).unwrap();
        assert_eq!(addr as usize % BUFFER_ALIGN, 0);
        assert!(b.read_back().is_empty(), "data to the device is not handed back");
        let again = b.stage(512, None, true).unwrap();
        assert_eq!(again, addr, "a smaller command reuses the buffer");
        assert_eq!(b.read_back(), &[7u8; 512][..]);
        let bigger = b.stage(8192, None, true).unwrap();
        assert_eq!(bigger as usize % BUFFER_ALIGN, 0);
        assert_eq!(b.read_back().len(), 8192);
    }
}
