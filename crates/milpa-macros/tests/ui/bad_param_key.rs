use milpa::tool;

/// Repeats a word.
#[tool]
fn repeat(#[param(descripton = "The word")] word: String) -> String {
    word.repeat(2)
}

fn main() {}
