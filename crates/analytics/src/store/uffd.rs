//! The few Linux calls the vertex pager needs: an anonymous mapping, and a
//! userfaultfd that reports missing-page and write-protect faults on it.
//!
//! This is one of the two modules of the crate allowed `unsafe` (with
//! [`crate::vertex`]): it calls `mmap`, `madvise`, `poll`, `read` and the
//! `UFFDIO_*` ioctls through `libc`. The structures below are those of
//! `include/uapi/linux/userfaultfd.h` (all fields native-endian u64 unless
//! said); the `libc` crate does not define them.
//!
//! ```text
//!  uffdio_api          { api u64 = 0xAA, features u64, ioctls u64 }            24 B
//!  uffdio_range        { start u64, len u64 }                                   16 B
//!  uffdio_register     { range, mode u64 (1 MISSING | 2 WP), ioctls u64 }       32 B
//!  uffdio_copy         { dst u64, src u64, len u64, mode u64 (1 DONTWAKE | 2 WP), copy i64 }  40 B
//!  uffdio_writeprotect { range, mode u64 (1 WP | 2 DONTWAKE) }                  24 B
//!  uffd_msg            { event u8 (0x12 PAGEFAULT), 0 u8, 0 u16, 0 u32,
//!                        flags u64 (1 WRITE | 2 WP), address u64, ptid u32, pad } 32 B
//! ```
//!
//! Ioctl numbers are `_IOC(dir, 0xAA, nr, size)` with x86-64/arm64's
//! encoding: `dir << 30 | size << 16 | 0xAA << 8 | nr`.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Bytes of a page (the kernel's base page on the machines Locus runs on).
pub const PAGE: usize = 4096;

const UFFD_API: u64 = 0xAA;
const IOC_WRITE: u64 = 1;
const IOC_READ: u64 = 2;

const fn ioc(dir: u64, nr: u64, size: u64) -> u64 {
    (dir << 30) | (size << 16) | (0xAA << 8) | nr
}

const UFFDIO_API: u64 = ioc(IOC_READ | IOC_WRITE, 0x3F, 24);
const UFFDIO_REGISTER: u64 = ioc(IOC_READ | IOC_WRITE, 0x00, 32);
const UFFDIO_WAKE: u64 = ioc(IOC_READ, 0x02, 16);
const UFFDIO_COPY: u64 = ioc(IOC_READ | IOC_WRITE, 0x03, 40);
const UFFDIO_WRITEPROTECT: u64 = ioc(IOC_READ | IOC_WRITE, 0x06, 24);

const REGISTER_MODE_MISSING: u64 = 1;
const REGISTER_MODE_WP: u64 = 2;
const COPY_MODE_WP: u64 = 2;
const WRITEPROTECT_MODE_WP: u64 = 1;
const EVENT_PAGEFAULT: u8 = 0x12;
const PAGEFAULT_FLAG_WRITE: u64 = 1;
const PAGEFAULT_FLAG_WP: u64 = 2;
/// `_UFFDIO_WRITEPROTECT`'s bit in the ioctls a registration allows.
const IOCTL_BIT_WRITEPROTECT: u64 = 1 << 0x06;
/// `_UFFDIO_COPY`'s bit.
const IOCTL_BIT_COPY: u64 = 1 << 0x03;
/// `USERFAULTFD_IOC_NEW` on `/dev/userfaultfd` (`_IO(0xAA, 0)`).
const USERFAULTFD_IOC_NEW: u64 = 0xAA << 8;

#[repr(C)]
struct UffdioApi {
    api: u64,
    features: u64,
    ioctls: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct UffdioRange {
    start: u64,
    len: u64,
}

#[repr(C)]
struct UffdioRegister {
    range: UffdioRange,
    mode: u64,
    ioctls: u64,
}

#[repr(C)]
struct UffdioCopy {
    dst: u64,
    src: u64,
    len: u64,
    mode: u64,
    copy: i64,
}

#[repr(C)]
struct UffdioWriteprotect {
    range: UffdioRange,
    mode: u64,
}

#[repr(C)]
struct UffdMsg {
    event: u8,
    reserved1: u8,
    reserved2: u16,
    reserved3: u32,
    flags: u64,
    address: u64,
    ptid: u64,
}

const _: () = assert!(std::mem::size_of::<UffdMsg>() == 32);
const _: () = assert!(std::mem::size_of::<UffdioCopy>() == 40);
const _: () = assert!(std::mem::size_of::<UffdioRegister>() == 32);

/// An anonymous private mapping of whole pages, unmapped on drop.
pub struct Mapping {
    base: *mut u8,
    len: usize,
}

// The mapping is plain memory; who may touch which page is the pager's business.
unsafe impl Send for Mapping {}
unsafe impl Sync for Mapping {}

impl Mapping {
    /// Reserves `len` bytes (a multiple of [`PAGE`]) of address space;
    /// nothing is populated, no huge pages are used.
    pub fn new(len: usize) -> io::Result<Mapping> {
        assert!(len > 0 && len.is_multiple_of(PAGE));
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let m = Mapping {
            base: p as *mut u8,
            len,
        };
        // Huge pages would make the kernel fault 2 MB at once.
        if unsafe { libc::madvise(p, len, libc::MADV_NOHUGEPAGE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(m)
    }

    /// First byte.
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    /// Bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Address of page `q`.
    pub fn page_addr(&self, q: u64) -> u64 {
        debug_assert!((q as usize) < self.len / PAGE);
        self.base as u64 + q * PAGE as u64
    }

    /// Drops pages `q..q+n` from the page tables (the next touch faults as missing).
    pub fn dont_need(&self, q: u64, n: u64) -> io::Result<()> {
        let r = unsafe {
            libc::madvise(
                self.page_addr(q) as *mut libc::c_void,
                n as usize * PAGE,
                libc::MADV_DONTNEED,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Copies page `q` out. The caller guarantees it is present (or the
    /// read faults to the handler like any access).
    pub fn read_page(&self, q: u64, out: &mut [u8]) {
        assert_eq!(out.len(), PAGE);
        unsafe {
            std::ptr::copy_nonoverlapping(self.page_addr(q) as *const u8, out.as_mut_ptr(), PAGE)
        };
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// What a fault asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The faulting address.
    pub address: u64,
    /// A write (to a missing page, or to a write-protected one).
    pub write: bool,
    /// A write to a present, write-protected page (else: missing page).
    pub wp: bool,
}

/// A userfaultfd with one registered range, and a pipe that stops its reader.
pub struct Uffd {
    fd: OwnedFd,
    stop_rx: OwnedFd,
    stop_tx: OwnedFd,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

impl Uffd {
    /// Opens a non-blocking userfaultfd (poll reports errors on a blocking
    /// one; the syscall, `/dev/userfaultfd` when the
    /// syscall is refused) and registers `m` for missing-page and
    /// write-protect faults. Every error says what failed.
    pub fn register(m: &Mapping) -> std::result::Result<Uffd, String> {
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, libc::O_CLOEXEC | libc::O_NONBLOCK) }
            as libc::c_int;
        let fd = if fd >= 0 {
            fd
        } else {
            let sys = io::Error::last_os_error();
            let dev =
                unsafe { libc::open(c"/dev/userfaultfd".as_ptr(), libc::O_RDWR | libc::O_CLOEXEC) };
            if dev < 0 {
                return Err(format!(
                    "userfaultfd(2) failed ({sys}) and /dev/userfaultfd cannot be opened ({}); \
                     run as root or set vm.unprivileged_userfaultfd=1",
                    io::Error::last_os_error()
                ));
            }
            let r = unsafe {
                libc::ioctl(
                    dev,
                    USERFAULTFD_IOC_NEW as _,
                    libc::O_CLOEXEC | libc::O_NONBLOCK,
                )
            };
            unsafe { libc::close(dev) };
            if r < 0 {
                return Err(format!(
                    "userfaultfd(2) failed ({sys}) and /dev/userfaultfd refused a new one ({})",
                    io::Error::last_os_error()
                ));
            }
            r
        };
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        let mut api = UffdioApi {
            api: UFFD_API,
            features: 0,
            ioctls: 0,
        };
        cvt(unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_API as _, &mut api) })
            .map_err(|e| format!("UFFDIO_API handshake failed: {e}"))?;
        let mut reg = UffdioRegister {
            range: UffdioRange {
                start: m.base() as u64,
                len: m.len() as u64,
            },
            mode: REGISTER_MODE_MISSING | REGISTER_MODE_WP,
            ioctls: 0,
        };
        cvt(unsafe { libc::ioctl(fd.as_raw_fd(), UFFDIO_REGISTER as _, &mut reg) }).map_err(
            |e| {
                format!(
                    "UFFDIO_REGISTER (missing + write-protect) of anonymous memory failed: {e}; \
                     needs Linux 5.7 or later with CONFIG_HAVE_ARCH_USERFAULTFD_WP"
                )
            },
        )?;
        let need = IOCTL_BIT_COPY | IOCTL_BIT_WRITEPROTECT;
        if reg.ioctls & need != need {
            return Err(format!(
                "the kernel registered the range without UFFDIO_COPY and UFFDIO_WRITEPROTECT \
                 (ioctls {:#x})",
                reg.ioctls
            ));
        }
        let mut p = [0 as libc::c_int; 2];
        cvt(unsafe { libc::pipe2(p.as_mut_ptr(), libc::O_CLOEXEC) })
            .map_err(|e| format!("pipe2: {e}"))?;
        Ok(Uffd {
            fd,
            stop_rx: unsafe { OwnedFd::from_raw_fd(p[0]) },
            stop_tx: unsafe { OwnedFd::from_raw_fd(p[1]) },
        })
    }

    /// Waits for the next fault; `None` once [`Uffd::stop`] was called.
    pub fn next_fault(&self) -> io::Result<Option<Fault>> {
        loop {
            let mut fds = [
                libc::pollfd {
                    fd: self.fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: self.stop_rx.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if fds[1].revents != 0 {
                return Ok(None);
            }
            if fds[0].revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
                return Err(io::Error::other(format!(
                    "poll on the userfaultfd reported {:#x}",
                    fds[0].revents
                )));
            }
            if fds[0].revents & libc::POLLIN == 0 {
                continue;
            }
            let mut msg = UffdMsg {
                event: 0,
                reserved1: 0,
                reserved2: 0,
                reserved3: 0,
                flags: 0,
                address: 0,
                ptid: 0,
            };
            let r = unsafe {
                libc::read(
                    self.fd.as_raw_fd(),
                    &mut msg as *mut UffdMsg as *mut libc::c_void,
                    std::mem::size_of::<UffdMsg>(),
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) {
                    continue;
                }
                return Err(e);
            }
            assert_eq!(r as usize, std::mem::size_of::<UffdMsg>(), "short uffd_msg");
            assert_eq!(msg.event, EVENT_PAGEFAULT, "only page faults are asked for");
            return Ok(Some(Fault {
                address: msg.address,
                write: msg.flags & PAGEFAULT_FLAG_WRITE != 0,
                wp: msg.flags & PAGEFAULT_FLAG_WP != 0,
            }));
        }
    }

    /// Makes [`Uffd::next_fault`] return `None` (from any thread).
    pub fn stop(&self) {
        let b = 1u8;
        unsafe {
            libc::write(
                self.stop_tx.as_raw_fd(),
                &b as *const u8 as *const libc::c_void,
                1,
            )
        };
    }

    /// Installs `src` (one page) at `dst`, write-protected if `wp`, and
    /// wakes the threads waiting on it. A page already there is an error
    /// (`EEXIST`): the pager installs only pages it knows are absent.
    pub fn copy(&self, dst: u64, src: &[u8], wp: bool) -> io::Result<()> {
        assert_eq!(src.len(), PAGE);
        loop {
            let mut c = UffdioCopy {
                dst,
                src: src.as_ptr() as u64,
                len: PAGE as u64,
                mode: if wp { COPY_MODE_WP } else { 0 },
                copy: 0,
            };
            let r = unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_COPY as _, &mut c) };
            if r == 0 {
                return Ok(());
            }
            let e = io::Error::last_os_error();
            // EAGAIN: the address space changed under the copy; try again.
            if e.raw_os_error() != Some(libc::EAGAIN) {
                return Err(e);
            }
        }
    }

    /// Sets (`wp`) or clears write protection on `len` bytes at `start`;
    /// clearing wakes the threads waiting on a write-protect fault there.
    pub fn write_protect(&self, start: u64, len: u64, wp: bool) -> io::Result<()> {
        let mut w = UffdioWriteprotect {
            range: UffdioRange { start, len },
            mode: if wp { WRITEPROTECT_MODE_WP } else { 0 },
        };
        cvt(unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_WRITEPROTECT as _, &mut w) })?;
        Ok(())
    }

    /// Wakes the threads waiting on a fault in `len` bytes at `start`, to
    /// fault again.
    pub fn wake(&self, start: u64, len: u64) -> io::Result<()> {
        let mut r = UffdioRange { start, len };
        cvt(unsafe { libc::ioctl(self.fd.as_raw_fd(), UFFDIO_WAKE as _, &mut r) })?;
        Ok(())
    }
}
