use milpa::tool;

struct Clock;

impl Clock {
    /// The time.
    #[tool]
    fn now(&self) -> u64 {
        0
    }
}

fn main() {
    let _ = Clock.now();
}
