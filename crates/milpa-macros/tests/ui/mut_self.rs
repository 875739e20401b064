use milpa::tools;

struct Counter {
    count: u64,
}

#[tools]
impl Counter {
    /// Counts one more.
    #[tool]
    fn increment(&mut self) -> u64 {
        self.count += 1;
        self.count
    }
}

fn main() {}
