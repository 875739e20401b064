use milpa::tool;

/// Reads a note.
#[tool]
fn read_note(#[param(within = "/srv/notes")] path: String) -> String {
    path
}

fn main() {}
