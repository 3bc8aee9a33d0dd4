//! Deciding what to migrate where (Pragh 3, 4.4).
//!
//! Each machine's **monitor** ([`monitor`]) turns its location cache's
//! access counts (the replacement policy's statistics, Pragh 4.4) into
//! periodic reports, and hot keys into instant ones. The **coordinator**
//! ([`policy`]) is a pure state machine that applies the threshold policy in
//! eager or deferred mode; its approvals are made durable in a redb file
//! ([`record`]) before any migration starts; **executors** ([`executor`])
//! run approved jobs as the target. The **driver** ([`driver`]) runs them as
//! threads over an embedded cluster, and keeps working while the coordinator
//! is down; a server process runs the same monitor and executor for its own
//! machine and talks to a coordinator process (`locus-server`). The driver
//! keeps time on a clock that stands still while it is paused ([`clock`]).
//! Every failure is a [`CoordinatorError`] ([`error`]).

#![warn(missing_docs)]

pub mod clock;
pub mod dispatch;
pub mod driver;
pub mod error;
pub mod executor;
pub mod monitor;
pub mod policy;
pub mod record;

pub use clock::ActiveClock;
pub use driver::{Driver, DriverConfig, DriverStats};
pub use error::{CoordinatorError, Result};
pub use executor::Executor;
pub use monitor::Monitor;
pub use policy::{Access, Action, Coordinator, Event, Mode, PolicyConfig, Stats};
pub use record::Record;
