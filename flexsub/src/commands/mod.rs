//! One module per command, each a thin binary's whole logic, named after the requests it sends:
//! [`submit`] (flexsub: Submit, TestOnly), [`queue`] (flexq: QueueRows, Queue, LeafMap),
//! [`cancel`] (flexcancel: Cancel), [`control`] (flexcontrol: Control), [`acct`] (flexacct:
//! Accounting), [`eff`] (flexeff: Accounting), [`report`] (flexreport: Accounting), [`prio`] (flexprio: Priority), [`share`]
//! (flexshare: Shares) and [`run`] (flexrun, inside a job: no request); [`host`] is the host
//! as Slurm's partition and node (Config, LeafMap, Queue), for `flexcontrol show partition` and
//! sinfo. The daemon answers each request
//! in `flexd/src/server/handlers/<request>.rs`.

pub mod acct;
pub mod cancel;
pub mod control;
pub mod eff;
pub mod host;
pub mod prio;
pub mod queue;
pub mod report;
pub mod run;
pub mod share;
pub mod submit;
