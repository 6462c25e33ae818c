//! [`TypedTool`]: a tool whose input is a typed struct. It states its name, kind and
//! description once; the blanket [`Tool`] impl gives the model the schema of its input type and
//! turns input that does not fit into the same [`InputError`](crate::InputError) outcome every
//! built-in tool gives, so a tool's body starts from an input already checked.

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::{input_schema, parse_input, BoxFuture, Tool, ToolContext, ToolKind, ToolOutcome};

/// A tool whose input is a typed struct (see the module doc). Implementing it implements
/// [`Tool`]. Its methods are named apart from [`Tool`]'s so that a type with both in scope
/// never makes a call ambiguous.
pub trait TypedTool: Send + Sync {
    /// The input, checked against its own schema and deserialized (leniently, see
    /// [`parse_input`]) before [`TypedTool::run`] sees it.
    type Input: DeserializeOwned + JsonSchema + Send + 'static;
    /// The name the model calls it by.
    const NAME: &'static str;
    /// What kind of tool it is.
    const KIND: ToolKind;
    /// What the model is told about the tool, in keel's own words.
    const DESCRIPTION: &'static str;
    /// Whether a call only reads (see [`Tool::is_read_only`]), when that holds for every call.
    const READ_ONLY: bool;

    /// The description offered; override it when it is built per instance.
    fn describe(&self) -> &str {
        Self::DESCRIPTION
    }

    /// The input schema offered; override it to add what is only known at run time.
    fn schema(&self) -> Value {
        input_schema::<Self::Input>()
    }

    /// Whether this call only reads; override it when that depends on the call.
    fn read_only(&self, _input: &Value) -> bool {
        Self::READ_ONLY
    }

    /// Run one call with its checked input. Must return promptly once `cx.cancel` is cancelled.
    fn run<'a>(&'a self, input: Self::Input, cx: ToolContext) -> BoxFuture<'a, ToolOutcome>;

    /// See [`Tool::prepare`].
    fn prepare_call(&self, _input: &Value, _tool_use_id: &str) {}
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        T::NAME
    }

    fn kind(&self) -> ToolKind {
        T::KIND
    }

    fn description(&self) -> &str {
        self.describe()
    }

    fn input_schema(&self) -> Value {
        self.schema()
    }

    fn is_read_only(&self, input: &Value) -> bool {
        self.read_only(input)
    }

    fn call<'a>(&'a self, input: Value, cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
        match parse_input::<T::Input>(T::NAME, &input) {
            Ok(input) => self.run(input, cx),
            Err(e) => Box::pin(std::future::ready(e.into())),
        }
    }

    fn prepare(&self, input: &Value, tool_use_id: &str) {
        self.prepare_call(input, tool_use_id);
    }
}
