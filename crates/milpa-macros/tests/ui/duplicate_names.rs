use milpa::tools;

struct Notes;

#[tools]
impl Notes {
    /// Lists the notes.
    #[tool]
    fn list(&self) -> Vec<String> {
        Vec::new()
    }

    /// Lists the notes, again.
    #[tool(name = "list")]
    fn list_again(&self) -> Vec<String> {
        Vec::new()
    }
}

fn main() {}
