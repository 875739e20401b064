use milpa::{tool, tools};

/// Repeats a word.
#[tool(mutating, mutating)]
fn repeat(#[param(description = "The word", description = "Again")] word: String) -> String {
    word.repeat(2)
}

struct Words;

#[tools]
impl Words {
    /// Shouts a word.
    #[tool(name = "shout", name = "yell")]
    fn shout(&self, #[param(pattern = "a", pattern = "b")] word: String) -> String {
        word.to_uppercase()
    }
}

fn main() {}
