//! The host side of the `milpa:tool@0.1.0` world (`wit/tool.wit`), generated at compile
//! time: `ToolPre` instantiates, `call_call` calls the export.

#![allow(missing_docs)]

wasmtime::component::bindgen!({
    path: "wit/tool.wit",
    world: "tool",
    exports: { default: async },
});
