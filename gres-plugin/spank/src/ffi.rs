//! The part of Slurm's spank.h this plugin uses, declared by hand (no C to maintain), with safe
//! wrappers. Values of `enum spank_item` are the header's, unchanged since Slurm 2.x for the
//! items used here.

use std::ffi::{c_char, c_int, c_uint, CStr, CString};

/// `spank_t`: an opaque handle owned by slurmstepd.
#[repr(C)]
pub struct SpankHandle {
    _private: [u8; 0],
}
pub type Spank = *mut SpankHandle;

pub const S_JOB_ID: c_int = 2;
pub const S_JOB_STEPID: c_int = 3;
pub const S_JOB_LOCAL_TASK_COUNT: c_int = 6;
pub const S_JOB_TOTAL_TASK_COUNT: c_int = 7;
pub const S_TASK_ID: c_int = 11;
pub const S_TASK_GLOBAL_ID: c_int = 12;

/// `ESPANK_SUCCESS`, and `ESPANK_NOSPACE` (the buffer was too small).
const ESPANK_SUCCESS: c_int = 0;
const ESPANK_NOSPACE: c_int = 6;

extern "C" {
    fn spank_get_item(spank: Spank, item: c_int, ...) -> c_int;
    fn spank_getenv(spank: Spank, var: *const c_char, buf: *mut c_char, len: c_int) -> c_int;
    fn spank_setenv(
        spank: Spank,
        var: *const c_char,
        val: *const c_char,
        overwrite: c_int,
    ) -> c_int;
    fn slurm_error(fmt: *const c_char, ...);
}

/// A `uint32_t` item of the job or task (S_JOB_ID, S_TASK_GLOBAL_ID, ...).
pub fn item_u32(sp: Spank, item: c_int) -> Result<u32, String> {
    let mut v: c_uint = 0;
    // SAFETY: `sp` is the handle slurmstepd passed to the callback; for these items spank.h
    // documents one `uint32_t *` argument, and `v` lives across the call.
    let rc = unsafe { spank_get_item(sp, item, &mut v as *mut c_uint) };
    if rc == ESPANK_SUCCESS {
        Ok(v)
    } else {
        Err(format!("spank_get_item({item}) failed with code {rc}"))
    }
}

/// An `int` item of the task (S_TASK_ID).
pub fn item_int(sp: Spank, item: c_int) -> Result<i32, String> {
    let mut v: c_int = 0;
    // SAFETY: as in `item_u32`; S_TASK_ID takes one `int *`.
    let rc = unsafe { spank_get_item(sp, item, &mut v as *mut c_int) };
    if rc == ESPANK_SUCCESS {
        Ok(v)
    } else {
        Err(format!("spank_get_item({item}) failed with code {rc}"))
    }
}

/// A variable of the task's environment; `None` when it is not set.
pub fn getenv(sp: Spank, var: &str) -> Option<String> {
    let name = CString::new(var).ok()?;
    let mut len = 4096usize;
    loop {
        let mut buf = vec![0u8; len];
        // SAFETY: `buf` has `len` writable bytes and spank_getenv writes at most `len`
        // (NUL included); `name` is NUL-terminated and outlives the call.
        let rc = unsafe { spank_getenv(sp, name.as_ptr(), buf.as_mut_ptr().cast(), len as c_int) };
        match rc {
            ESPANK_SUCCESS => {
                let end = buf.iter().position(|&b| b == 0).unwrap_or(len);
                return Some(String::from_utf8_lossy(&buf[..end]).into_owned());
            }
            ESPANK_NOSPACE if len < (1 << 24) => len *= 4,
            _ => return None,
        }
    }
}

/// Set a variable in the task's environment, replacing it.
pub fn setenv(sp: Spank, var: &str, val: &str) -> Result<(), String> {
    let (k, v) = match (CString::new(var), CString::new(val)) {
        (Ok(k), Ok(v)) => (k, v),
        _ => return Err(format!("{var}: a NUL byte in the name or value")),
    };
    // SAFETY: both strings are NUL-terminated and outlive the call; `sp` is the live handle.
    let rc = unsafe { spank_setenv(sp, k.as_ptr(), v.as_ptr(), 1) };
    if rc == ESPANK_SUCCESS {
        Ok(())
    } else {
        Err(format!("spank_setenv({var}) failed with code {rc}"))
    }
}

/// A line in slurmd's log, at error level.
pub fn log_error(msg: &str) {
    let Ok(m) = CString::new(msg.replace('\0', " ")) else {
        return;
    };
    let fmt: &CStr = c"%s";
    // SAFETY: a constant "%s" format with one NUL-terminated string argument.
    unsafe { slurm_error(fmt.as_ptr(), m.as_ptr()) };
}
