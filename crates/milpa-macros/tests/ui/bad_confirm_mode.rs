use milpa::tools;

struct Ops;

#[tools]
impl Ops {
    /// Restarts a service.
    #[tool(mutating, confirm = "manager")]
    fn restart(&self, service: String) -> String {
        service
    }
}

fn main() {}
