use milpa::tool;

/// A struct is not a tool.
#[tool]
struct Settings {
    verbose: bool,
}

fn main() {}
