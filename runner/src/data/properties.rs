//! Property tests of data judgement: the map against a naive per-block model, and fill,
//! judge and diagnosis over random tags, block sizes and corruptions.

use proptest::prelude::*;

use super::*;

/// A small LBA space so that random operations overlap often.
const LBAS: u64 = 96;

#[derive(Clone, Debug)]
struct Op {
    first: u64,
    count: u64,
    state: Expectation,
}

fn state() -> impl Strategy<Value = Expectation> {
    prop_oneof![
        (1u64..4).prop_map(|generation| Expectation::Written { generation, seed: 5 }),
        Just(Expectation::Written { generation: 1, seed: 6 }),
        Just(Expectation::Deallocated { previous: None }),
        Just(Expectation::Deallocated { previous: Some(Previous::Zeroes) }),
        (1u64..4).prop_map(|generation| Expectation::Deallocated {
            previous: Some(Previous::Written { generation, seed: 5 })
        }),
        Just(Expectation::Zeroes),
        Just(Expectation::Unknown),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    (0..LBAS, 0..40u64, state()).prop_map(|(first, count, state)| Op { first, count, state })
}

fn block_size() -> impl Strategy<Value = BlockSize> {
    prop_oneof![Just(512u32), Just(4096), (8u32..1200).prop_map(|words| words * 8)]
        .prop_map(|bytes| BlockSize::new(bytes).expect("a multiple of 8 of at least 64"))
}

fn tag() -> impl Strategy<Value = BlockTag> {
    (any::<u32>(), any::<u64>(), any::<u64>(), any::<u64>(), block_size())
        .prop_map(|(nsid, lba, generation, seed, block_size)| BlockTag { nsid, lba, generation, seed, block_size })
}

/// `tag` with one field changed (never the block size: that is another format).
fn other_tag() -> impl Strategy<Value = (BlockTag, BlockTag)> {
    (tag(), 0..4usize, 1..u64::MAX).prop_map(|(tag, field, delta)| {
        let mut other = tag;
        match field {
            0 => other.nsid = tag.nsid.wrapping_add(delta as u32 | 1),
            1 => other.lba = tag.lba.wrapping_add(delta),
            2 => other.generation = tag.generation.wrapping_add(delta),
            _ => other.seed = tag.seed.wrapping_add(delta),
        }
        (tag, other)
    })
}

fn block_of(tag: &BlockTag) -> Vec<u8> {
    let mut block = vec![0u8; tag.block_size.bytes()];
    fill_block(&mut block, tag).expect("one block");
    block
}

/// The block format as the module documentation states it, word by word.
fn reference_block(tag: &BlockTag) -> Vec<u8> {
    fn mix(mut z: u64) -> u64 {
        z ^= z >> 30;
        z = z.wrapping_mul(0xbf58476d1ce4e5b9);
        z ^= z >> 27;
        z = z.wrapping_mul(0x94d049bb133111eb);
        z ^ (z >> 31)
    }
    const PHI: u64 = 0x9e3779b97f4a7c15;
    let size = u64::from(tag.block_size.get());
    let mut header = Vec::new();
    header.extend_from_slice(b"nvtestB1");
    header.extend_from_slice(&tag.nsid.to_le_bytes());
    header.extend_from_slice(&tag.block_size.get().to_le_bytes());
    header.extend_from_slice(&tag.generation.to_le_bytes());
    header.extend_from_slice(&tag.seed.to_le_bytes());
    header.extend_from_slice(&tag.lba.to_le_bytes());
    header.extend_from_slice(&[0; 8]);
    let crc = crc::Crc::<u32>::new(&crc::CRC_32_ISCSI).checksum(&header);
    header.extend_from_slice(&crc.to_le_bytes());
    header.extend_from_slice(&[0; 12]);
    let key =
        mix(mix(mix(mix(tag.seed ^ 0x6e76746573742d64) ^ (u64::from(tag.nsid) | size << 32)) ^ tag.generation)
            ^ tag.lba);
    let mut block = header;
    for i in 8..size / 8 {
        let k = mix((i % 512 + 1).wrapping_mul(PHI));
        let chunk = i / 512;
        let c = if chunk == 0 { key } else { mix(key.wrapping_add(chunk.wrapping_mul(PHI))) };
        block.extend_from_slice(&(k ^ c).to_le_bytes());
    }
    block
}

fn written(tag: &BlockTag) -> Expectation {
    Expectation::Written { generation: tag.generation, seed: tag.seed }
}

fn mismatch<T: std::fmt::Debug>(result: Result<T, JudgeError>) -> Result<Mismatch, TestCaseError> {
    match result {
        Err(JudgeError::Mismatch(mismatch)) => Ok(*mismatch),
        other => Err(TestCaseError::fail(format!("expected a mismatch, got {other:?}"))),
    }
}

proptest! {
    #[test]
    fn the_map_agrees_with_a_per_block_model(ops in prop::collection::vec(op(), 0..40)) {
        let mut map = NamespaceMap::new();
        let mut model = vec![Expectation::Unknown; LBAS as usize + 40];
        for op in &ops {
            map.set(op.first, op.count, op.state);
            for state in &mut model[op.first as usize..(op.first + op.count) as usize] {
                *state = op.state;
            }
        }
        for (lba, expected) in model.iter().enumerate() {
            prop_assert_eq!(map.state_at(lba as u64), *expected, "LBA {}", lba);
        }
        let mut per_block = Vec::new();
        for segment in map.segments(0, model.len() as u64) {
            prop_assert!(segment.count > 0);
            per_block.extend(std::iter::repeat_n(segment.state, segment.count as usize));
        }
        prop_assert_eq!(&per_block, &model);
        // Stored ranges are disjoint, sorted, known, and merged with equal neighbours.
        let known: Vec<Segment> = map.known().collect();
        for pair in known.windows(2) {
            prop_assert!(pair[0].first + pair[0].count <= pair[1].first);
            prop_assert!(pair[0].first + pair[0].count < pair[1].first || pair[0].state != pair[1].state);
        }
        prop_assert!(known.iter().all(|s| s.state != Expectation::Unknown && s.count > 0));
    }

    #[test]
    fn a_filled_block_is_judged_right(tag in tag()) {
        let block = block_of(&tag);
        prop_assert_eq!(judge_block(&block, tag.nsid, tag.lba, written(&tag), DeallocatedRead::Zeroes), Ok(()));
        prop_assert_eq!(decode_header(&block), Some(tag));
    }

    #[test]
    fn a_filled_block_is_the_documented_format(tag in tag()) {
        prop_assert_eq!(block_of(&tag), reference_block(&tag));
    }

    #[test]
    fn a_run_of_blocks_equals_its_blocks_filled_one_by_one(
        first in tag(),
        carry_bits in 0..64u32,
        near in any::<bool>(),
        blocks in 1..12usize,
    ) {
        // Start either anywhere or just below a carry into bit `carry_bits`.
        let lba = if near { (1u64 << carry_bits).wrapping_sub(3) } else { first.lba };
        let first = BlockTag { lba: lba.min(u64::MAX - blocks as u64), ..first };
        let size = first.block_size.bytes();
        let mut run = vec![0u8; size * blocks];
        fill_blocks(&mut run, &first).expect("whole blocks");
        for (index, block) in run.chunks_exact(size).enumerate() {
            let lba = first.lba + index as u64;
            prop_assert_eq!(block, &block_of(&BlockTag { lba, ..first })[..], "LBA {:#x}", lba);
        }
        let mut map = HostMap::new();
        map.record_write(first.nsid, first.lba, blocks as u64, first.generation, first.seed);
        let judged = judge_range(&run, first.nsid, first.lba, first.block_size, &map, DeallocatedRead::Zeroes);
        prop_assert_eq!(judged, Ok(Judged::default()));
    }

    #[test]
    fn any_changed_byte_is_caught_where_it_is(tag in tag(), at in any::<prop::sample::Index>(), flip in 1..=255u8) {
        let mut block = block_of(&tag);
        let at = at.index(block.len());
        block[at] ^= flip;
        let m = mismatch(judge_block(&block, tag.nsid, tag.lba, written(&tag), DeallocatedRead::NotReported))?;
        prop_assert_eq!((m.first_difference, m.last_difference), (at, at));
        if at < HEADER_LEN {
            prop_assert!(matches!(m.found, Found::CorruptHeader | Found::Unrecognisable), "{:?}", m.found);
        } else {
            let torn_at_the_byte = matches!(m.found, Found::Torn { header, from, .. } if header == tag && from == at);
            prop_assert!(torn_at_the_byte, "{:?}", m.found);
        }
    }

    #[test]
    fn another_tag_s_block_is_diagnosed_as_that_block((tag, other) in other_tag()) {
        let block = block_of(&other);
        let m = mismatch(judge_block(&block, tag.nsid, tag.lba, written(&tag), DeallocatedRead::NotReported))?;
        prop_assert_eq!(m.found, Found::Block(other));
        // The body differs too, not only the header: its last word is always wrong.
        if block.len() > HEADER_LEN {
            prop_assert!(m.last_difference >= block.len() - 8, "last difference at {}", m.last_difference);
        }
    }

    #[test]
    fn a_block_left_where_zeros_are_due_is_named(tag in tag()) {
        let block = block_of(&tag);
        let m = mismatch(judge_block(&block, tag.nsid, tag.lba, Expectation::Zeroes, DeallocatedRead::Ones))?;
        prop_assert_eq!(m.found, Found::Block(tag));
        prop_assert!(m.to_string().contains("still holds generation"), "{}", m);
    }

    #[test]
    fn a_deallocated_block_may_keep_its_data_but_nothing_else(
        (tag, other) in other_tag(),
        dealloc in prop_oneof![Just(DeallocatedRead::Zeroes), Just(DeallocatedRead::Ones)],
    ) {
        let expected = written(&tag).deallocated();
        for dealloc in [dealloc, DeallocatedRead::NotReported] {
            prop_assert_eq!(judge_block(&block_of(&tag), tag.nsid, tag.lba, expected, dealloc), Ok(()));
        }
        let m = mismatch(judge_block(&block_of(&other), tag.nsid, tag.lba, expected, dealloc))?;
        prop_assert_eq!(m.found, Found::Block(other));
        prop_assert!(m.to_string().contains("after a deallocate; DLFEAT promises"), "{}", m);
    }

    #[test]
    fn the_map_after_deallocates_agrees_with_a_per_block_model(
        ops in prop::collection::vec((op(), any::<bool>()), 0..40),
    ) {
        let mut map = NamespaceMap::new();
        let mut model = vec![Expectation::Unknown; LBAS as usize + 40];
        for (op, deallocate) in &ops {
            let blocks = &mut model[op.first as usize..(op.first + op.count) as usize];
            if *deallocate {
                map.deallocate(op.first, op.count);
                blocks.iter_mut().for_each(|state| *state = state.deallocated());
            } else {
                map.set(op.first, op.count, op.state);
                blocks.fill(op.state);
            }
        }
        let per_block: Vec<Expectation> =
            map.segments(0, model.len() as u64).flat_map(|s| std::iter::repeat_n(s.state, s.count as usize)).collect();
        prop_assert_eq!(&per_block, &model);
        let known: Vec<Segment> = map.known().collect();
        for pair in known.windows(2) {
            prop_assert!(pair[0].first + pair[0].count < pair[1].first || pair[0].state != pair[1].state);
        }
    }

    #[test]
    fn a_range_judged_against_its_map_finds_exactly_the_spoilt_block(
        ops in prop::collection::vec(op(), 1..20),
        spoil in 0..LBAS,
    ) {
        let block_size = BlockSize::new(512).expect("valid");
        let mut map = HostMap::new();
        for op in &ops {
            map.namespace_mut(4).set(op.first, op.count, op.state);
        }
        let mut buf = vec![0u8; LBAS as usize * 512];
        for (lba, block) in (0..).zip(buf.chunks_exact_mut(512)) {
            if let Expectation::Written { generation, seed } = map.state_at(4, lba) {
                fill_block(block, &BlockTag { nsid: 4, lba, generation, seed, block_size }).expect("one block");
            }
        }
        prop_assert_eq!(judge_range(&buf, 4, 0, block_size, &map, DeallocatedRead::Zeroes).map(|_| ()), Ok(()));
        buf[spoil as usize * 512 + 100] ^= 0x40;
        let result = judge_range(&buf, 4, 0, block_size, &map, DeallocatedRead::Zeroes);
        match map.state_at(4, spoil) {
            Expectation::Unknown | Expectation::Deallocated { previous: None } => {
                prop_assert_eq!(result.map(|_| ()), Ok(()))
            }
            _ => {
                let m = mismatch(result)?;
                prop_assert_eq!((m.lba, m.wrong_blocks, m.first_difference), (spoil, 1, 100));
            }
        }
    }
}
