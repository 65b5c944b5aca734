//! I/O queue pairs created for one workload ([`QueueSet`]): the driver's side of
//! [`crate::queued::QueuedIo`] on sim, QEMU and (later) vfio targets.
//!
//! The set borrows the controller for as long as the workload runs, so no other command
//! path can disturb its queues; closing it (or dropping it) deletes them again (Delete
//! I/O Submission Queue, then Delete I/O Completion Queue, §5.6 / §5.5).

use crate::device::{Data, DeviceError};
use crate::driver::controller::Controller;
use crate::driver::queue::{IoQueuePair, Reaped, Transfer};
use crate::queued::{QueueSpec, QueuedIo};
use crate::spec::{Command, Completion};

/// Queues of one controller created for a workload, numbered in the order asked for.
pub struct QueueSet<'a> {
    controller: &'a mut Controller,
    qids: Vec<u16>,
    closed: bool,
}

impl<'a> QueueSet<'a> {
    /// Creates one queue pair per spec, with the lowest queue identifiers the controller
    /// allocated (Set Features Number of Queues) that are not in use.
    pub(super) fn open(controller: &'a mut Controller, specs: &[QueueSpec]) -> Result<QueueSet<'a>, DeviceError> {
        let (nsqa, ncqa) = controller.queues_allocated();
        let limit = nsqa.min(ncqa);
        let in_use: Vec<u16> = controller.io.iter().map(|q| q.qid).collect();
        let free: Vec<u16> = (1..=limit).filter(|q| !in_use.contains(q)).take(specs.len()).collect();
        if free.len() < specs.len() {
            return Err(DeviceError::Unsupported(format!(
                "the workload needs {} I/O queues of its own; the controller allocated {limit} \
                 (Set Features Number of Queues) and {} are in use",
                specs.len(),
                in_use.len()
            )));
        }
        let mut set = QueueSet { controller, qids: Vec::with_capacity(specs.len()), closed: false };
        for (qid, spec) in free.into_iter().zip(specs) {
            // One entry more than the depth: a full queue keeps one entry empty (§4.1.2).
            set.controller.create_queue_pair(qid, spec.depth.saturating_add(1), spec.priority)?;
            set.qids.push(qid);
        }
        Ok(set)
    }

    fn pair(&mut self, queue: usize) -> Result<IoQueuePair<'_>, DeviceError> {
        let qid =
            *self.qids.get(queue).ok_or_else(|| DeviceError::Driver(format!("the workload has no queue {queue}")))?;
        self.controller.queue(qid)
    }

    fn delete_all(&mut self) -> Result<(), DeviceError> {
        self.closed = true;
        let mut first_error = None;
        for qid in std::mem::take(&mut self.qids) {
            if let Err(e) = self.controller.delete_queue_pair(qid) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl QueuedIo for QueueSet<'_> {
    fn describe(&self) -> String {
        let qids: Vec<String> = self.qids.iter().map(u16::to_string).collect();
        format!("{}, I/O queues {}", crate::device::Device::describe(&*self.controller), qids.join(", "))
    }

    fn queue_count(&self) -> usize {
        self.qids.len()
    }

    fn qid(&self, queue: usize) -> u16 {
        self.qids.get(queue).copied().unwrap_or(0)
    }

    fn capacity(&self, queue: usize) -> usize {
        let qid = self.qid(queue);
        self.controller.io.iter().find(|q| q.qid == qid).map_or(0, |q| q.capacity())
    }

    fn outstanding(&self, queue: usize) -> usize {
        let qid = self.qid(queue);
        self.controller.io.iter().find(|q| q.qid == qid).map_or(0, |q| q.outstanding())
    }

    fn submit(
        &mut self,
        queue: usize,
        cmd: Command,
        data: Transfer<'_>,
        metadata: Transfer<'_>,
    ) -> Result<u16, DeviceError> {
        self.pair(queue)?.submit_with_metadata(cmd, data, metadata)
    }

    fn ring(&mut self, queue: usize) -> Result<(), DeviceError> {
        self.pair(queue)?.ring()
    }

    fn poll(&mut self, queue: usize, f: &mut dyn FnMut(Reaped<'_>)) -> Result<usize, DeviceError> {
        self.pair(queue)?.poll(f)
    }

    fn expired(&mut self, queue: usize) -> Option<DeviceError> {
        self.pair(queue).ok()?.expired()
    }

    fn now_ns(&mut self) -> u64 {
        self.controller.transport.now_ns()
    }

    fn idle_until(&mut self, deadline_ns: u64) -> Result<(), DeviceError> {
        Ok(self.controller.transport.idle_until(deadline_ns)?)
    }

    fn simulated_clock(&self) -> bool {
        self.controller.transport.simulated_clock()
    }

    fn close(mut self: Box<Self>) -> Result<(), DeviceError> {
        self.delete_all()
    }

    fn set_port_link(&mut self, port: usize, up: bool) -> Result<Option<u64>, DeviceError> {
        use crate::device::Device;
        let count = self.controller.port_count();
        let Some(other) = self.controller.port(port) else {
            return Err(DeviceError::Driver(format!("port {} is not there: {count} other ports", port + 2)));
        };
        other.set_link(up)
    }

    fn admin(&mut self, cmd: Command, data: Data<'_>) -> Result<Completion, DeviceError> {
        // The controller's own admin queue: the workload's I/O queues are not touched.
        crate::device::Device::admin(&mut *self.controller, cmd, data)
    }

    fn power_cut(mut self: Box<Self>, seed: u64) -> Result<(), DeviceError> {
        // The queues go with the power: nothing is deleted, the controller forgets them.
        self.closed = true;
        self.qids.clear();
        self.controller.power_off(seed)
    }

    fn pull_drive(&mut self, seed: u64) -> Result<(), DeviceError> {
        self.controller.pull_drive(seed)
    }

    fn abandon(mut self: Box<Self>) {
        self.closed = true;
        self.qids.clear();
        self.controller.lost();
    }
}

impl Drop for QueueSet<'_> {
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.delete_all();
        }
    }
}
