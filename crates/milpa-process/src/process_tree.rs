//! Ending everything a child program started (a command tool, a notify command, a stdio
//! upstream), including what left its process group.
//!
//! A command runs in its own process group, and killing the group ends the program and
//! whatever it started in the usual way. A descendant that called `setsid` (or `setpgid`)
//! is in another group and would survive that kill, holding on to files, ports or a
//! `sleep 30; touch MARKER` of its own.
//!
//! **Linux**: the milpa process makes itself a *child subreaper*
//! (`prctl(PR_SET_CHILD_SUBREAPER)`) when it first starts a command, so a descendant whose
//! parent exits is adopted by milpa instead of by init, and stays findable. When a call ends
//! (its program exited, it timed out, or it was cancelled), every descendant of the program
//! is killed with `SIGKILL`: those still below it (walking `/proc` by parent pid) and the
//! orphans milpa adopted, then milpa reaps what it adopted. The setting is process-wide and
//! lasts as long as the milpa process (`milpa call`, `milpa serve`, or a program built on
//! `milpa_cli::main_with`): any orphaned descendant of that process is adopted by it.
//!
//! Adopted orphans carry no mark of the call they came from. An orphan is killed when no
//! running call could have started it: each running call registers its program's pid and
//! start time, and an orphan started after a still-running call began is left to that call
//! (it is killed when the last such call ends). Processes in milpa's own process group are
//! never taken for orphans: a program embedding milpa-cli that starts children of its own
//! in the same group keeps them. One that starts children in a group of their own and
//! outlives their parent should know that they will be taken for a command's orphans.
//!
//! A stdio upstream (`milpa_gateway::upstream`) is registered like a running call for as long
//! as it runs: an orphan that appears while an upstream runs is left to it and killed when
//! the upstream ends (restart or shutdown), not when an unrelated command tool's call ends.
//!
//! **Other systems** get the process group kill only: a descendant that left the group
//! survives the call.

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use parking_lot::{Mutex, MutexGuard};

/// Held while a program is started and registered, and while the process table is read to
/// decide what is an orphan. Without it a program another call has just started, but not
/// yet registered, looks like nobody's orphan: it was killed, or its exit status reaped
/// from under tokio, whose wait then failed with `ECHILD` ("Could not wait: No child
/// processes"; seen with 200 concurrent calls of a command tool through `milpa serve`).
static PROCESS_TABLE: Mutex<()> = Mutex::new(());

fn process_table() -> MutexGuard<'static, ()> {
    PROCESS_TABLE.lock()
}

/// Starts `command` (a program in a process group of its own) and registers it, as one
/// step that no orphan scan can fall between.
pub fn spawn(
    command: &mut tokio::process::Command,
) -> std::io::Result<(tokio::process::Child, ProcessTree)> {
    adopt_orphans();
    let _table = process_table();
    let child = command.spawn()?;
    let tree = ProcessTree::new(child.id());
    Ok((child, tree))
}

/// Makes this process adopt orphaned descendants (Linux); once per process.
fn adopt_orphans() {
    #[cfg(target_os = "linux")]
    linux::adopt_orphans();
}

/// A command's program while it runs: killing it (or dropping it) ends the program's process
/// group and, on Linux, every process the program started, wherever it went.
#[derive(Debug)]
pub struct ProcessTree {
    root: Option<Pid>,
    #[cfg(target_os = "linux")]
    start: Option<u64>,
}

impl ProcessTree {
    /// The tree of a program just started with `pid` as its own process group leader.
    fn new(pid: Option<u32>) -> ProcessTree {
        let root = pid.and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw);
        #[cfg(target_os = "linux")]
        let start = root.map(linux::register);
        ProcessTree {
            root,
            #[cfg(target_os = "linux")]
            start: start.flatten(),
        }
    }

    /// Kills the program's group and (Linux) every descendant; the second call does nothing.
    pub fn kill(&mut self) {
        let Some(root) = self.root.take() else {
            return;
        };
        // ESRCH (nobody left) is the usual answer.
        let _ = killpg(root, Signal::SIGKILL);
        #[cfg(target_os = "linux")]
        linux::kill_descendants(root, self.start);
    }
}

impl Drop for ProcessTree {
    fn drop(&mut self) {
        self.kill();
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::HashSet;
    use std::sync::Once;
    use std::time::{Duration, Instant};

    use nix::sys::signal::{Signal, kill};
    use nix::sys::wait::{WaitPidFlag, waitpid};
    use nix::unistd::{Pid, getpgrp, getpid};
    use parking_lot::Mutex;

    /// Rounds of scan-and-kill: a process forking while it is being killed shows up in the
    /// next scan; killed processes cannot fork again, so a few rounds settle it.
    const KILL_ROUNDS: usize = 8;

    /// How long the reaper waits for killed processes to be adopted and reaped.
    const REAP_DEADLINE: Duration = Duration::from_secs(10);

    /// The programs of running calls: pid and start time (clock ticks since boot; `0` when
    /// the program had already exited when it was registered, which makes it a possible
    /// owner of every orphan, the cautious side).
    static RUNNING: Mutex<Vec<(Pid, u64)>> = Mutex::new(Vec::new());

    pub(super) fn adopt_orphans() {
        static ONCE: Once = Once::new();
        ONCE.call_once(|| {
            if let Err(error) = nix::sys::prctl::set_child_subreaper(true) {
                tracing::warn!(
                    target: "milpa::command",
                    "could not become a child subreaper ({error}); a command's descendants that leave its process group survive a timeout"
                );
            }
        });
    }

    /// Notes a running program; its start time, when it could be read.
    pub(super) fn register(pid: Pid) -> Option<u64> {
        let start = Stat::read(pid).map(|s| s.start);
        running().push((pid, start.unwrap_or(0)));
        start
    }

    fn running() -> parking_lot::MutexGuard<'static, Vec<(Pid, u64)>> {
        RUNNING.lock()
    }

    /// One line of `/proc/PID/stat`, the fields used here.
    #[derive(Debug, Clone, Copy)]
    struct Stat {
        pid: Pid,
        ppid: Pid,
        pgid: Pid,
        zombie: bool,
        start: u64,
    }

    impl Stat {
        fn read(pid: Pid) -> Option<Stat> {
            let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Stat::parse(pid, &text)
        }

        /// `pid (comm) state ppid pgrp session … starttime …`; `comm` may hold spaces and
        /// parentheses, so the fields are counted from the last `)`.
        fn parse(pid: Pid, text: &str) -> Option<Stat> {
            let rest = &text[text.rfind(')')? + 1..];
            let fields: Vec<&str> = rest.split_whitespace().collect();
            Some(Stat {
                pid,
                zombie: *fields.first()? == "Z",
                ppid: Pid::from_raw(fields.get(1)?.parse().ok()?),
                pgid: Pid::from_raw(fields.get(2)?.parse().ok()?),
                // Field 22 of the line; the state is field 3.
                start: fields.get(19)?.parse().ok()?,
            })
        }
    }

    fn snapshot() -> Vec<Stat> {
        let Ok(entries) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|entry| {
                let name = entry.ok()?.file_name();
                let pid: i32 = name.to_str()?.parse().ok()?;
                Stat::read(Pid::from_raw(pid))
            })
            .collect()
    }

    /// Kills every descendant of `root` (started at `start`) and the orphans no running call
    /// could own, then reaps, on a thread of its own, what this process adopted.
    pub(super) fn kill_descendants(root: Pid, start: Option<u64>) {
        // No program starts while the table is read (see `PROCESS_TABLE`).
        let table_lock = super::process_table();
        {
            let mut running = running();
            if let Some(i) = running.iter().position(|(pid, _)| *pid == root) {
                running.swap_remove(i);
            }
        }
        let me = getpid();
        let my_group = getpgrp();
        let mut killed: HashSet<(Pid, u64)> = HashSet::new();
        for _ in 0..KILL_ROUNDS {
            let table = snapshot();
            let owners: Vec<u64> = running().iter().map(|(_, s)| *s).collect();
            let mut roots: Vec<Pid> = Vec::new();
            // The program itself, unless its pid now belongs to someone else.
            if table
                .iter()
                .any(|s| s.pid == root && Some(s.start) == start)
            {
                roots.push(root);
            }
            roots.extend(
                table
                    .iter()
                    .filter(|s| {
                        s.ppid == me
                            && s.pid != root
                            && s.pgid != my_group
                            && !owners.iter().any(|owner| *owner <= s.start)
                    })
                    .map(|s| s.pid),
            );
            let mut tree: Vec<Stat> = Vec::new();
            let mut frontier = roots;
            while let Some(parent) = frontier.pop() {
                for stat in table.iter().filter(|s| s.ppid == parent) {
                    frontier.push(stat.pid);
                    tree.push(*stat);
                }
                if let Some(stat) = table.iter().find(|s| s.pid == parent) {
                    tree.push(*stat);
                }
            }
            let alive: Vec<&Stat> = tree
                .iter()
                .filter(|s| !s.zombie && s.pid != me && !killed.contains(&(s.pid, s.start)))
                .collect();
            if alive.is_empty() {
                break;
            }
            for stat in alive {
                let _ = kill(stat.pid, Signal::SIGKILL);
                killed.insert((stat.pid, stat.start));
            }
        }
        // The program is tokio's to reap; the rest, once adopted, is ours.
        killed.retain(|(pid, _)| *pid != root);
        let strays = stray_zombies(me, my_group, root);
        drop(table_lock);
        if killed.is_empty() && strays.is_empty() {
            return;
        }
        let spawned = std::thread::Builder::new()
            .name("milpa-reaper".into())
            .spawn(move || reap(me, killed, strays));
        if let Err(error) = spawned {
            tracing::warn!(target: "milpa::command", "could not start the reaper thread: {error}");
        }
    }

    /// Zombies this process adopted earlier (orphans that ended on their own) and no running
    /// call's program: nobody else will reap them.
    fn stray_zombies(me: Pid, my_group: Pid, root: Pid) -> Vec<(Pid, u64)> {
        let running: Vec<Pid> = running().iter().map(|(pid, _)| *pid).collect();
        snapshot()
            .into_iter()
            .filter(|s| {
                s.zombie
                    && s.ppid == me
                    && s.pid != root
                    && s.pgid != my_group
                    && !running.contains(&s.pid)
            })
            .map(|s| (s.pid, s.start))
            .collect()
    }

    /// Waits for each killed process to be gone: reaps it once this process adopted it (its
    /// own parent reaps it otherwise, or dies and hands it over).
    fn reap(me: Pid, killed: HashSet<(Pid, u64)>, strays: Vec<(Pid, u64)>) {
        let deadline = Instant::now() + REAP_DEADLINE;
        let mut waiting: Vec<(Pid, u64)> = killed.into_iter().chain(strays).collect();
        while !waiting.is_empty() && Instant::now() < deadline {
            waiting.retain(|(pid, start)| match Stat::read(*pid) {
                Some(stat) if stat.start == *start => {
                    if stat.ppid == me && stat.zombie {
                        // Only this pid: other children belong to tokio's own reaping.
                        let _ = waitpid(*pid, Some(WaitPidFlag::WNOHANG));
                    }
                    true
                }
                // Gone, or the pid now names another process.
                _ => false,
            });
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn stat_lines_are_read_from_the_last_parenthesis() {
            let line = "4242 (a) b (c) S 17 4242 4242 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10";
            let stat = Stat::parse(Pid::from_raw(4242), line).unwrap();
            assert_eq!(stat.ppid, Pid::from_raw(17));
            assert_eq!(stat.pgid, Pid::from_raw(4242));
            assert_eq!(stat.start, 987654);
            assert!(!stat.zombie);
            let own = Stat::read(getpid()).unwrap();
            assert_eq!(own.pgid, getpgrp());
        }
    }
}
