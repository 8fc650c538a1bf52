//! Where the CPU of a benchmark's window went: each process's, the database server's,
//! the machine's idle time.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The database server's processes on this machine (PostgreSQL's and MariaDB's, found by
/// their names in `/proc`): whichever the load runs on, the other idles.
pub(crate) fn database_pids() -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| matches!(comm.trim(), "postgres" | "mariadbd" | "mysqld"))
        })
        .collect()
}

/// The CPU of the processes of a run, read at its start: [`CpuAccount::print`] says
/// where it went by its end.
pub(crate) struct CpuAccount {
    /// Each Spindle process's name, pid and CPU-seconds at the start.
    processes: Vec<(&'static str, u32, f64)>,
    /// The database server's processes at the start (those it starts meanwhile, such
    /// as PostgreSQL's backends, are counted from zero).
    database: HashMap<u32, f64>,
    own: f64,
    machine: (u64, u64, usize),
    started: Instant,
}

impl CpuAccount {
    pub(crate) fn start(processes: impl IntoIterator<Item = (&'static str, u32)>) -> CpuAccount {
        let cpu = super::cpu_seconds_of;
        CpuAccount {
            processes: processes
                .into_iter()
                .map(|(name, pid)| (name, pid, cpu(pid)))
                .collect(),
            database: database_pids()
                .into_iter()
                .map(|pid| (pid, cpu(pid)))
                .collect(),
            own: cpu(std::process::id()),
            machine: super::machine_cpu(),
            started: Instant::now(),
        }
    }

    /// Prints each process's CPU as milliseconds per `what` (`count` of them), then what
    /// the machine used besides them and its idle time.
    pub(crate) fn print(&self, what: &str, count: usize) {
        let cpu = super::cpu_seconds_of;
        let elapsed = self.started.elapsed();
        let mut account: Vec<(String, f64)> = self
            .processes
            .iter()
            .map(|(name, pid, before)| ((*name).to_owned(), cpu(*pid) - before))
            .collect();
        let database_pids = database_pids();
        let database: f64 = database_pids
            .iter()
            .map(|pid| cpu(*pid) - self.database.get(pid).copied().unwrap_or(0.0))
            .sum();
        account.push((
            format!("database server ({} processes)", database_pids.len()),
            database,
        ));
        account.push((
            "load generator".to_owned(),
            cpu(std::process::id()) - self.own,
        ));
        print_account(&account, self.machine, elapsed, what, count);
    }
}

/// Prints where the CPU of the run went: each (name, CPU-seconds) as milliseconds per
/// `what` (`count` of them), then what the machine used besides them and its idle time.
fn print_account(
    account: &[(String, f64)],
    machine_before: (u64, u64, usize),
    elapsed: Duration,
    what: &str,
    count: usize,
) {
    let machine_after = super::machine_cpu();
    let (busy, all, cpus) = (
        machine_after.0.saturating_sub(machine_before.0) as f64,
        machine_after.1.saturating_sub(machine_before.1).max(1) as f64,
        machine_after.2 as f64,
    );
    let wall = elapsed.as_secs_f64() * cpus;
    let (busy, idle) = (busy / all * wall, (all - busy) / all * wall);
    let per = |seconds: f64| seconds * 1e3 / count.max(1) as f64;
    println!(
        "| CPU per {what} ({cpus} cores × {:.1} s) | ms |",
        elapsed.as_secs_f64()
    );
    println!("|---|---:|");
    let mut named = 0.0;
    for (name, seconds) in account {
        named += seconds;
        println!("| {name} | {:.3} |", per(*seconds));
    }
    println!(
        "| the rest (kernel, other processes) | {:.3} |",
        per((busy - named).max(0.0))
    );
    println!("| idle | {:.3} |", per(idle));
}
