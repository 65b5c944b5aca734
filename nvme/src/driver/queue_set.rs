//! I/O queue pairs created for one workload ([`QueueSet`]): the driver's side of
//! [`crate::queued::QueuedIo`] on sim, QEMU and (later) vfio targets.
//!
//! The set borrows the controller for as long as the workload runs, so no other command
//! path can disturb its queues; closing it (or dropping it) deletes them again (Delete
//! I/O Submission Queue, then Delete I/O Completion Queue, §5.6 / §5.5). A queue may be
//! on another port of the drive ([`QueueSpec::port`]): each controller has its own queue
//! identifiers, and the set reaches the others through the one it borrows.
//!
//! A controller that allocated no more queues than the driver already keeps for its own
//! commands (Number of Queues, §5.21.1.7: a drive may allocate a single I/O queue) still
//! runs a workload: the set takes over the driver's own idle queues (deletes them and
//! creates its own with those identifiers) and creates them again when it is closed.

use crate::device::{Data, DeviceError};
use crate::driver::controller::Controller;
use crate::driver::queue::{IoQueuePair, Reaped, Transfer};
use crate::queued::{QueueSpec, QueuedIo};
use crate::spec::{Command, Completion};

/// Queues created for a workload, numbered in the order asked for, each on the port its
/// spec names.
pub struct QueueSet<'a> {
    controller: &'a mut Controller,
    /// Per queue: its port (0: `controller`) and queue identifier there.
    qids: Vec<(usize, u16)>,
    /// The driver's own queues the set took over (port, queue identifier), created again
    /// when it closes.
    taken_over: Vec<(usize, u16)>,
    closed: bool,
}

impl<'a> QueueSet<'a> {
    /// Creates one queue pair per spec, with the lowest queue identifiers the controller
    /// allocated (Set Features Number of Queues) that are not in use.
    pub(super) fn open(controller: &'a mut Controller, specs: &[QueueSpec]) -> Result<QueueSet<'a>, DeviceError> {
        let mut set =
            QueueSet { controller, qids: Vec::with_capacity(specs.len()), taken_over: Vec::new(), closed: false };
        for spec in specs {
            let port = spec.port;
            let taken: Vec<u16> = set.qids.iter().filter(|(p, _)| *p == port).map(|(_, q)| *q).collect();
            let ctrl = set.controller_of(port)?;
            let (nsqa, ncqa) = ctrl.queues_allocated();
            let limit = nsqa.min(ncqa);
            let in_use: Vec<u16> = ctrl.io.iter().map(|q| q.qid).collect();
            let free = (1..=limit).find(|q| !in_use.contains(q) && !taken.contains(q));
            // None free: one of the driver's own queues, idle while the set holds the controller.
            let own = || ctrl.io.iter().find(|q| !taken.contains(&q.qid) && q.outstanding() == 0).map(|q| q.qid);
            let (qid, took) = match (free, own()) {
                (Some(qid), _) => (qid, false),
                (None, Some(qid)) => {
                    ctrl.delete_queue_pair(qid)?;
                    (qid, true)
                }
                (None, None) => {
                    let wanted = specs.iter().filter(|s| s.port == port).count();
                    return Err(DeviceError::Unsupported(format!(
                        "the workload needs {wanted} I/O queues of its own on port {}; the controller allocated \
                         {limit} (Set Features Number of Queues)",
                        port + 1
                    )));
                }
            };
            // One entry more than the depth: a full queue keeps one entry empty (§4.1.2).
            let created = ctrl.create_queue_pair(qid, spec.depth.saturating_add(1), spec.priority);
            if took {
                set.taken_over.push((port, qid));
            }
            created?;
            set.qids.push((port, qid));
        }
        Ok(set)
    }

    /// Queue `queue`'s I/O queue pair, to look at.
    fn io_queue(&self, queue: usize) -> Option<&crate::driver::queue::QueuePair> {
        let (port, qid) = *self.qids.get(queue)?;
        self.controller.port_ref(port)?.io.iter().find(|q| q.qid == qid)
    }

    /// The controller of port `port` (0: the one the set borrows).
    fn controller_of(&mut self, port: usize) -> Result<&mut Controller, DeviceError> {
        let count = self.controller.other_ports();
        self.controller.port_mut(port).ok_or_else(|| {
            DeviceError::Unsupported(format!(
                "a queue on port {} asked for; the drive has {} ports",
                port + 1,
                count + 1
            ))
        })
    }

    fn pair(&mut self, queue: usize) -> Result<IoQueuePair<'_>, DeviceError> {
        let (port, qid) =
            *self.qids.get(queue).ok_or_else(|| DeviceError::Driver(format!("the workload has no queue {queue}")))?;
        self.controller_of(port)?.queue(qid)
    }

    /// Lets the other ports' controllers run up to the clock: on a simulated drive a
    /// port runs what fell due only when it is touched.
    fn catch_up_ports(&mut self) -> Result<(), DeviceError> {
        let mut ports: Vec<usize> = self.qids.iter().map(|(p, _)| *p).filter(|p| *p != 0).collect();
        ports.dedup();
        for port in ports {
            self.controller_of(port)?.transport.idle_until(0)?;
        }
        Ok(())
    }

    /// Deletes the set's queues, then creates the driver's own queues it took over again.
    fn delete_all(&mut self) -> Result<(), DeviceError> {
        self.closed = true;
        let mut first_error = None;
        for (port, qid) in std::mem::take(&mut self.qids) {
            if let Err(e) = self.controller_of(port).and_then(|c| c.delete_queue_pair(qid)) {
                first_error.get_or_insert(e);
            }
        }
        for (port, qid) in std::mem::take(&mut self.taken_over) {
            if let Err(e) = self.controller_of(port).and_then(|c| c.create_own_queue(qid)) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl QueuedIo for QueueSet<'_> {
    fn describe(&self) -> String {
        let qids: Vec<String> = self
            .qids
            .iter()
            .map(|(port, qid)| if *port == 0 { qid.to_string() } else { format!("{qid} (port {})", port + 1) })
            .collect();
        format!("{}, I/O queues {}", crate::device::Device::describe(&*self.controller), qids.join(", "))
    }

    fn queue_count(&self) -> usize {
        self.qids.len()
    }

    fn qid(&self, queue: usize) -> u16 {
        self.qids.get(queue).map_or(0, |(_, qid)| *qid)
    }

    fn capacity(&self, queue: usize) -> usize {
        self.io_queue(queue).map_or(0, |q| q.capacity())
    }

    fn outstanding(&self, queue: usize) -> usize {
        self.io_queue(queue).map_or(0, |q| q.outstanding())
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
        if self.qids.get(queue).is_some_and(|(port, _)| *port != 0) {
            let (port, _) = self.qids[queue];
            self.controller_of(port)?.transport.idle_until(0)?;
        }
        self.pair(queue)?.poll(f)
    }

    fn expired(&mut self, queue: usize) -> Option<DeviceError> {
        self.pair(queue).ok()?.expired()
    }

    fn now_ns(&mut self) -> u64 {
        self.controller.transport.now_ns()
    }

    fn idle_until(&mut self, deadline_ns: u64) -> Result<(), DeviceError> {
        self.controller.transport.idle_until(deadline_ns)?;
        self.catch_up_ports()
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
        // The driver's own queues come back when the controller is brought up again.
        self.taken_over.clear();
        self.controller.power_off(seed)
    }

    fn pull_drive(&mut self, seed: u64) -> Result<(), DeviceError> {
        self.controller.pull_drive(seed)
    }

    fn abandon(mut self: Box<Self>) {
        self.closed = true;
        self.qids.clear();
        self.taken_over.clear();
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
