//! The cgroup2 device filter: cgroup2 has no devices controller, so a job's devices are
//! limited by a `BPF_PROG_TYPE_CGROUP_DEVICE` program attached to its cgroup, as Slurm's
//! cgroup/v2 plugin (its `ebpf.c`), runc and systemd do. The kernel runs the program on every
//! open or mknod of a device node by a process of the cgroup; a 0 answer is EPERM.
//!
//! The program is a handful of instructions written here and loaded with the `bpf()` system
//! call: no compiler and no BPF library at build or run time. It denies the given character
//! devices (consecutive minors as one range) and allows everything else:
//!
//! ```text
//! r2 = ctx.access_type & 0xffff        ; the device type: 1 block, 2 char
//! r4 = ctx.major; r5 = ctx.minor
//! if r2 != char goto allow
//! for each range: if r4 == major && lo <= r5 <= hi: return 0
//! allow: return 1
//! ```

use super::devices::Dev;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// One BPF instruction (`struct bpf_insn`): opcode, destination register in the low nibble
/// and source register in the high one, offset, immediate.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

// Opcodes (linux/bpf_common.h, linux/bpf.h).
const LDX_W_MEM: u8 = 0x61; // BPF_LDX | BPF_W | BPF_MEM
const ALU32_AND_K: u8 = 0x54; // BPF_ALU | BPF_AND | BPF_K
const ALU64_MOV_K: u8 = 0xb7; // BPF_ALU64 | BPF_MOV | BPF_K
const JNE_K: u8 = 0x55; // BPF_JMP | BPF_JNE | BPF_K
const JLT_K: u8 = 0xa5; // BPF_JMP | BPF_JLT | BPF_K
const JGT_K: u8 = 0x25; // BPF_JMP | BPF_JGT | BPF_K
const EXIT: u8 = 0x95; // BPF_JMP | BPF_EXIT

/// `BPF_DEVCG_DEV_CHAR`.
const DEV_CHAR: i32 = 2;

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | dst,
        off,
        imm,
    }
}

/// `deny` as ranges of consecutive minors of one major.
fn ranges(deny: &[Dev]) -> Vec<(u32, u32, u32)> {
    let mut devs = deny.to_vec();
    devs.sort_unstable();
    devs.dedup();
    let mut out: Vec<(u32, u32, u32)> = Vec::new();
    for d in devs {
        match out.last_mut() {
            Some((major, _, hi)) if *major == d.major && *hi + 1 == d.minor => *hi = d.minor,
            _ => out.push((d.major, d.minor, d.minor)),
        }
    }
    out
}

/// The program that denies `deny` and allows every other device.
pub(crate) fn program(deny: &[Dev]) -> Vec<Insn> {
    let mut p = vec![
        insn(LDX_W_MEM, 2, 1, 0, 0),
        insn(ALU32_AND_K, 2, 0, 0, 0xffff),
        insn(LDX_W_MEM, 4, 1, 4, 0),
        insn(LDX_W_MEM, 5, 1, 8, 0),
        // Its offset to `allow` is set once the ranges are written.
        insn(JNE_K, 2, 0, 0, DEV_CHAR),
    ];
    // Major and minors are below 2^20: they fit the immediate's 32 bits as they are.
    for (major, lo, hi) in ranges(deny) {
        if lo == hi {
            p.push(insn(JNE_K, 4, 0, 3, major as i32));
            p.push(insn(JNE_K, 5, 0, 2, lo as i32));
        } else {
            p.push(insn(JNE_K, 4, 0, 4, major as i32));
            p.push(insn(JLT_K, 5, 0, 3, lo as i32));
            p.push(insn(JGT_K, 5, 0, 2, hi as i32));
        }
        p.push(insn(ALU64_MOV_K, 0, 0, 0, 0));
        p.push(insn(EXIT, 0, 0, 0, 0));
    }
    let allow = p.len();
    p[4].off = (allow - 4 - 1) as i16;
    p.push(insn(ALU64_MOV_K, 0, 0, 0, 1));
    p.push(insn(EXIT, 0, 0, 0, 0));
    p
}

/// `union bpf_attr` as BPF_PROG_LOAD reads it, up to the fields used here.
#[repr(C)]
#[derive(Default)]
struct LoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` as BPF_PROG_ATTACH reads it.
#[repr(C)]
struct AttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
    replace_bpf_fd: u32,
}

fn bpf<T>(cmd: libc::c_long, attr: &T) -> std::io::Result<libc::c_long> {
    // SAFETY: `attr` is a live, initialized repr(C) value of the size passed; the kernel reads
    // no more than that size, and zero-fills nothing of ours.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *const T,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(r)
}

/// Load `prog` as a cgroup device program; the descriptor holds it.
fn load(prog: &[Insn]) -> std::io::Result<OwnedFd> {
    let license = c"GPL";
    let mut name = [0u8; 16];
    name[..8].copy_from_slice(b"flex_dev");
    let attr = LoadAttr {
        prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
        insn_cnt: prog.len() as u32,
        insns: prog.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name,
        ..LoadAttr::default()
    };
    let fd = bpf(BPF_PROG_LOAD, &attr)?;
    // SAFETY: a successful BPF_PROG_LOAD returns a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Whether this kernel lets flexd filter devices this way (root, a kernel with
/// CONFIG_CGROUP_BPF): loads a program that allows everything, and drops it.
pub(crate) fn supported() -> Result<(), String> {
    load(&program(&[]))
        .map(drop)
        .map_err(|e| format!("the kernel refuses a BPF device program ({e})"))
}

/// Deny `deny` to every process of the cgroup2 cgroup `dir` (and its descendants). The
/// cgroup keeps the program until it is removed.
pub(crate) fn attach(dir: &Path, deny: &[Dev]) -> Result<(), String> {
    if deny.is_empty() {
        return Ok(());
    }
    let prog = load(&program(deny)).map_err(|e| {
        format!(
            "cannot load the BPF device program for {}: {e}",
            dir.display()
        )
    })?;
    let cgroup = std::fs::File::open(dir)
        .map_err(|e| format!("cannot open the cgroup {}: {e}", dir.display()))?;
    let attr = AttachAttr {
        target_fd: cgroup.as_raw_fd() as u32,
        attach_bpf_fd: prog.as_raw_fd() as u32,
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: 0,
        replace_bpf_fd: 0,
    };
    bpf(BPF_PROG_ATTACH, &attr).map(drop).map_err(|e| {
        format!(
            "cannot attach the BPF device program to {}: {e}",
            dir.display()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn dev(major: u32, minor: u32) -> Dev {
        Dev { major, minor }
    }

    #[test]
    fn consecutive_minors_are_one_range() {
        let deny = [
            dev(195, 3),
            dev(195, 1),
            dev(195, 2),
            dev(237, 12),
            dev(195, 5),
        ];
        assert_eq!(
            ranges(&deny),
            [(195, 1, 3), (195, 5, 5), (237, 12, 12)],
            "sorted, deduplicated, merged"
        );
    }

    /// Run `p` on a device as the kernel would (the subset of eBPF the program uses).
    fn run(p: &[Insn], typ: u32, major: u32, minor: u32) -> u64 {
        let ctx = [typ | (6 << 16), major, minor];
        let mut r = [0u64; 11];
        let mut pc = 0usize;
        loop {
            let i = p[pc];
            let (dst, src) = ((i.regs & 0xf) as usize, (i.regs >> 4) as usize);
            let imm = i.imm as i64 as u64;
            let jump = |cond: bool| if cond { i.off as isize } else { 0 };
            let mut next = 1isize;
            match i.code {
                LDX_W_MEM => {
                    assert_eq!(src, 1, "loads only from the context");
                    r[dst] = u64::from(ctx[i.off as usize / 4]);
                }
                ALU32_AND_K => r[dst] = (r[dst] as u32 & i.imm as u32) as u64,
                ALU64_MOV_K => r[dst] = imm,
                JNE_K => next += jump(r[dst] != imm),
                JLT_K => next += jump(r[dst] < imm),
                JGT_K => next += jump(r[dst] > imm),
                EXIT => return r[0],
                c => panic!("unexpected opcode {c:#x}"),
            }
            pc = (pc as isize + next) as usize;
        }
    }

    #[test]
    fn the_program_denies_exactly_the_listed_character_devices() {
        let deny = [
            dev(195, 1),
            dev(195, 2),
            dev(195, 3),
            dev(237, 12),
            dev(195, 7),
        ];
        let p = program(&deny);
        for minor in 0..20 {
            let denied = (1..=3).contains(&minor) || minor == 7;
            assert_eq!(run(&p, 2, 195, minor), u64::from(!denied), "c 195:{minor}");
            assert_eq!(run(&p, 1, 195, minor), 1, "b 195:{minor} is not a GPU");
        }
        assert_eq!(run(&p, 2, 237, 12), 0);
        assert_eq!(run(&p, 2, 237, 13), 1);
        assert_eq!(run(&p, 2, 1, 3), 1, "/dev/null");
        assert_eq!(run(&program(&[]), 2, 195, 0), 1, "nothing denied");
    }
}
