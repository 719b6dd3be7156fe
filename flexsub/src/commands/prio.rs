//! flexprio: each pending job's priority and the weighted factors it is made of (like sprio).

use crate::client::{into_error, Client};
use crate::error::{exit, Error};
use crate::format::cut;
use clap::Parser;
use flex_proto::{PrioQuery, PrioReply, Request, Response};
use gres_plugin::JobId;
use std::fmt::Write as _;
use std::io::Write;

/// Show pending jobs' priorities and their factors (like sprio): age, fair share, job size
/// and QOS, each weighted as flexd.toml's [priority] says, minus the job's nice.
#[derive(Debug, Parser)]
#[command(name = "flexprio", version, disable_help_flag = true)]
pub struct Args {
    /// Only these users' jobs (comma-separated names or uids).
    #[arg(
        short = 'u',
        long = "user",
        value_delimiter = ',',
        value_name = "USERS"
    )]
    pub users: Vec<String>,
    /// Only these jobs (comma-separated ids).
    #[arg(short = 'j', long = "jobs", value_delimiter = ',', value_name = "IDS")]
    pub jobs: Vec<u64>,
    /// Print the weights instead of the jobs (sprio -w).
    #[arg(short = 'w', long = "weights")]
    pub weights: bool,
    /// Print JSON: the weights and every selected job's row.
    #[arg(long)]
    pub json: bool,
    /// Leave out the header line.
    #[arg(short = 'h', long = "noheader")]
    pub noheader: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// Run flexprio; returns the exit code.
pub fn run(a: &Args, out: &mut impl Write) -> Result<i32, Error> {
    let q = PrioQuery {
        users: a.users.clone(),
        jobs: a.jobs.iter().copied().map(JobId).collect(),
    };
    let reply = match Client::connect("flexprio")?.call(&Request::Priority(q))? {
        Response::Priority(r) => r,
        other => return Err(into_error(other)),
    };
    let text = if a.json {
        serde_json::to_string_pretty(&reply).expect("protocol types serialize") + "\n"
    } else {
        table(&reply, a.weights, !a.noheader)
    };
    out.write_all(text.as_bytes()).map_err(Error::output)?;
    Ok(exit::OK)
}

/// sprio's columns: the job, its user, the priority and each weighted factor.
pub fn table(r: &PrioReply, weights: bool, header: bool) -> String {
    let mut s = String::new();
    if header {
        s.push_str("     JOBID     USER      ACCOUNT   PRIORITY       AGE  FAIRSHARE   JOBSIZE       QOS   NICE\n");
    }
    if weights {
        let w = &r.weights;
        let _ = writeln!(
            s,
            "{:>10} {:>8} {:>12} {:>10} {:>9} {:>10} {:>9} {:>9} {:>6}",
            "Weights", "", "", "", w.age, w.fairshare, w.job_size, w.qos, ""
        );
        return s;
    }
    for j in &r.jobs {
        let _ = writeln!(
            s,
            "{:>10} {:>8} {:>12} {:>10} {:>9.0} {:>10.0} {:>9.0} {:>9.0} {:>6}",
            j.job.0,
            cut(&j.user, 8),
            cut(&j.account, 12),
            j.priority,
            j.age,
            j.fairshare,
            j.job_size,
            j.qos_part,
            j.nice
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_parse() {
        use clap::CommandFactory;
        Args::command().debug_assert();
    }
    use flex_proto::{PrioRow, PrioWeights};

    #[test]
    fn rows_and_weights_line_up_under_the_header() {
        let r = PrioReply {
            weights: PrioWeights {
                age: 1000,
                fairshare: 10000,
                job_size: 0,
                qos: 10000,
            },
            jobs: vec![PrioRow {
                job: JobId(7),
                user: "alice".into(),
                account: "physics".into(),
                qos: "normal".into(),
                priority: 2750,
                age: 250.4,
                fairshare: 2500.0,
                job_size: 0.0,
                qos_part: 0.0,
                nice: 0,
            }],
        };
        let t = table(&r, false, true);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].len(), lines[1].len(), "{t}");
        assert!(
            lines[1].contains("alice") && lines[1].contains(" 2750 ") && lines[1].contains(" 250 ")
        );
        let w = table(&r, true, false);
        assert!(w.starts_with("   Weights") && w.contains(" 10000 "), "{w}");
    }
}
