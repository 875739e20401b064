use milpa::tool;

/// Appends to a list.
#[tool]
fn append(items: &mut Vec<String>) {
    items.push(String::new());
}

fn main() {}
