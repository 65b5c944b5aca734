//! Command arbitration (NVMe 1.4 §4.13 "Command Arbitration"): which submission queue the
//! controller takes its next I/O command from when it has room for one.
//!
//! The admin queue is served first, always (§4.13: it is the highest priority, strictly).
//! With CC.AMS = 000b every I/O SQ is in one round robin. With CC.AMS = 001b (Weighted
//! Round Robin with Urgent Priority Class, §4.13.2) the SQ's QPRIO puts it in a class:
//! Urgent is served strictly before the others; High, Medium and Low share in rounds of
//! HPW + 1, MPW + 1 and LPW + 1 commands (Set Features Arbitration, Figure "Arbitration –
//! Command Dword 11"). Within a class the SQs take turns; a turn takes at most the
//! Arbitration Burst, 2^AB commands (111b: no limit), from one SQ.
//!
//! Quirks break it at the rule each names: `wrr-weights-ignored` (High, Medium and Low
//! one round robin), `urgent-not-first` (Urgent one more weighted class, with High's
//! weight), `arbitration-burst-ignored` (one command per turn whatever AB says) and
//! `wrr-not-enabled` (CC.AMS = 001b accepted and read back, service stays round robin)
//! and `wrr-weights-inverted` (High served by LPW + 1, Low by HPW + 1).

use crate::subsystem::{Quirk, Quirks};

const URGENT: usize = 0;
/// The weighted classes in the order a round serves them.
const WEIGHTED: [usize; 3] = [1, 2, 3];

/// The arbiter of one controller.
#[derive(Clone, Debug, Default)]
pub(super) struct Arbiter {
    /// Weighted round robin in effect (CC.AMS latched at enable, and no quirk against it).
    wrr: bool,
    /// Commands per turn (2^AB; `u32::MAX` for no limit).
    burst: u32,
    /// Commands per round of each class (index = QPRIO): HPW + 1, MPW + 1, LPW + 1.
    weights: [u32; 4],
    credits: [u32; 4],
    /// The SQs of each class in creation order.
    members: [Vec<u16>; 4],
    /// Index in `members` of the SQ whose turn it is, and commands it took this turn.
    turn: [(usize, u32); 4],
    quirks: Quirks,
}

impl Arbiter {
    pub fn new(quirks: Quirks) -> Arbiter {
        let mut a = Arbiter { quirks, ..Arbiter::default() };
        a.set_feature(0);
        a
    }

    /// CC.EN 0 → 1 with CC.AMS `ams`: the mechanism is latched until the next enable.
    pub fn enable(&mut self, ams: u8) {
        self.wrr = ams == 0b001 && !self.quirks.has(Quirk::WrrNotEnabled);
        self.members = Default::default();
        self.turn = Default::default();
        self.credits = self.weights;
    }

    /// Set Features Arbitration (FID 01h) Command Dword 11: AB 2:0, LPW 15:8, MPW 23:16,
    /// HPW 31:24.
    pub fn set_feature(&mut self, cdw11: u32) {
        let ab = cdw11 & 7;
        self.burst = match ab {
            _ if self.quirks.has(Quirk::ArbitrationBurstIgnored) => 1,
            7 => u32::MAX,
            ab => 1 << ab,
        };
        let weight = |shift: u32| ((cdw11 >> shift) & 0xff) + 1;
        let (hpw, mpw, lpw) = (weight(24), weight(16), weight(8));
        // Quirk `wrr-weights-inverted`: High takes LPW's rounds and Low HPW's.
        self.weights =
            if self.quirks.has(Quirk::WrrWeightsInverted) { [hpw, lpw, mpw, hpw] } else { [hpw, hpw, mpw, lpw] };
        self.credits = self.weights;
    }

    fn class(&self, qprio: u8) -> usize {
        if !self.wrr {
            return 0;
        }
        match qprio & 3 {
            0 => URGENT,
            // Quirk `wrr-weights-ignored`: High, Medium and Low share one round robin.
            _ if self.quirks.has(Quirk::WrrWeightsIgnored) => 1,
            p => p as usize,
        }
    }

    pub fn add(&mut self, qid: u16, qprio: u8) {
        let c = self.class(qprio);
        self.members[c].push(qid);
    }

    pub fn remove(&mut self, qid: u16) {
        for (c, list) in self.members.iter_mut().enumerate() {
            if let Some(i) = list.iter().position(|&q| q == qid) {
                list.remove(i);
                let (at, _) = self.turn[c];
                if i < at || at >= list.len() {
                    self.turn[c] = (if i < at { at - 1 } else { 0 }, 0);
                }
            }
        }
    }

    /// The SQ to take the next command from, among those `ready` accepts.
    pub fn pick(&mut self, ready: &mut dyn FnMut(u16) -> bool) -> Option<u16> {
        if !self.wrr {
            return self.pick_in(0, ready);
        }
        let urgent_first = !self.quirks.has(Quirk::UrgentNotFirst);
        if urgent_first {
            if let Some(q) = self.pick_in(URGENT, ready) {
                return q.into();
            }
        }
        for _refill in 0..2 {
            // Quirk `urgent-not-first`: Urgent is served in the round, before High.
            let classes = (!urgent_first).then_some(URGENT).into_iter().chain(WEIGHTED);
            for c in classes {
                if self.credits[c] > 0 {
                    if let Some(q) = self.pick_in(c, ready) {
                        self.credits[c] -= 1;
                        return Some(q);
                    }
                }
            }
            self.credits = self.weights;
        }
        None
    }

    /// Round robin within class `c`, a turn lasting at most the burst.
    fn pick_in(&mut self, c: usize, ready: &mut dyn FnMut(u16) -> bool) -> Option<u16> {
        let list = &self.members[c];
        let n = list.len();
        if n == 0 {
            return None;
        }
        let (at, taken) = self.turn[c];
        let at = at % n;
        // Quirk `round-robin-favours-last`: under round robin the SQ created last has turns
        // twice as long.
        let burst = if !self.wrr && at == n - 1 && self.quirks.has(Quirk::RoundRobinFavoursLast) {
            self.burst.saturating_mul(2)
        } else {
            self.burst
        };
        if taken < burst && ready(list[at]) {
            self.turn[c] = (at, taken + 1);
            return Some(list[at]);
        }
        for step in 1..=n {
            let i = (at + step) % n;
            if ready(list[i]) {
                self.turn[c] = (i, 1);
                return Some(list[i]);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(a: &mut Arbiter, n: usize) -> Vec<u16> {
        (0..n).filter_map(|_| a.pick(&mut |_| true)).collect()
    }

    #[test]
    fn round_robin_takes_bursts_in_turn() {
        let mut a = Arbiter::new(Quirks::default());
        a.set_feature(1); // AB 1: two per turn
        a.enable(0);
        for q in 1..=3 {
            a.add(q, 3);
        }
        assert_eq!(order(&mut a, 7), [1, 1, 2, 2, 3, 3, 1]);
    }

    #[test]
    fn weighted_classes_follow_their_weights_and_urgent_goes_first() {
        let mut a = Arbiter::new(Quirks::default());
        a.set_feature(2 << 24 | 1 << 16 | 7);
        a.enable(1);
        a.add(1, 1);
        a.add(2, 2);
        a.add(3, 3);
        assert_eq!(order(&mut a, 7), [1, 1, 1, 2, 2, 3, 1]);
        a.add(4, 0);
        assert_eq!(order(&mut a, 3), [4, 4, 4]);
    }
}
