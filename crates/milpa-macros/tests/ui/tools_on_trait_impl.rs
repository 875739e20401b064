use milpa::tools;

struct Clock;

trait Now {
    fn now(&self) -> u64;
}

#[tools]
impl Now for Clock {
    /// The time.
    #[tool]
    fn now(&self) -> u64 {
        0
    }
}

fn main() {
    let _ = Clock.now();
}
