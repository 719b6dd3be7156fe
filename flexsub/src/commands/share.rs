//! flexshare: users' and accounts' shares, decayed usage and fair-share factors (like sshare).

use crate::client::{into_error, Client};
use crate::error::{exit, Error};
use crate::format::cut;
use clap::Parser;
use flex_proto::{Request, Response, ShareQuery, ShareRow};
use std::fmt::Write as _;
use std::io::Write;

/// Show the fair share of accounts and users (like sshare): shares (raw and normalized),
/// decayed usage in slice-hours (a 1g leaf for an hour is 1, flexreport's unit), the share of
/// all usage, and the fair-share factor that weighs into priority.
#[derive(Debug, Parser)]
#[command(name = "flexshare", version, disable_help_flag = true)]
pub struct Args {
    /// Only these users (comma-separated names); without, every account and user.
    #[arg(
        short = 'u',
        long = "users",
        value_delimiter = ',',
        value_name = "USERS"
    )]
    pub users: Vec<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Leave out the header line.
    #[arg(short = 'h', long = "noheader")]
    pub noheader: bool,
    /// Print help.
    #[arg(long, action = clap::ArgAction::Help)]
    pub help: Option<bool>,
}

/// Run flexshare; returns the exit code.
pub fn run(a: &Args, out: &mut impl Write) -> Result<i32, Error> {
    let q = ShareQuery {
        users: a.users.clone(),
    };
    let rows = match Client::connect("flexshare")?.call(&Request::Shares(q))? {
        Response::Shares(r) => r,
        other => return Err(into_error(other)),
    };
    let text = if a.json {
        serde_json::to_string_pretty(&rows).expect("protocol types serialize") + "\n"
    } else {
        table(&rows, !a.noheader)
    };
    out.write_all(text.as_bytes()).map_err(Error::output)?;
    Ok(exit::OK)
}

/// sshare's columns.
pub fn table(rows: &[ShareRow], header: bool) -> String {
    let mut s = String::new();
    if header {
        s.push_str("             Account       User  RawShares  NormShares    RawUsage  EffectvUsage  FairShare\n");
    }
    for r in rows {
        let _ = writeln!(
            s,
            "{:>20} {:>10} {:>10} {:>11.6} {:>11.2} {:>13.6} {:>10.6}",
            cut(&r.account, 20),
            cut(r.user.as_deref().unwrap_or(""), 10),
            r.raw_shares,
            r.norm_shares,
            r.raw_usage,
            r.effective_usage,
            r.fairshare
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

    #[test]
    fn accounts_and_users_line_up_under_the_header() {
        let rows = [
            ShareRow {
                account: "physics".into(),
                user: None,
                raw_shares: 3,
                norm_shares: 0.75,
                raw_usage: 12.5,
                effective_usage: 0.5,
                fairshare: 0.63,
            },
            ShareRow {
                account: String::new(),
                user: Some("alice".into()),
                raw_shares: 1,
                norm_shares: 0.5,
                raw_usage: 12.5,
                effective_usage: 1.0,
                fairshare: 0.25,
            },
        ];
        let t = table(&rows, true);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines.iter().all(|l| l.len() == lines[0].len()), "{t}");
        assert!(lines[1].contains("physics") && lines[1].contains("12.50"));
        assert!(lines[2].contains("alice") && lines[2].contains("0.250000"));
    }
}
