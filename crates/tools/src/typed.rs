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

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use serde::Deserialize;
    use serde_json::json;

    use super::*;
    use crate::CancelToken;

    /// Echo's input.
    #[derive(Deserialize, JsonSchema)]
    #[schemars(deny_unknown_fields)]
    pub struct Input {
        /// What to say back.
        text: String,
    }

    /// Says its input back and counts how often its body ran.
    struct Echo(AtomicUsize);

    impl TypedTool for Echo {
        type Input = Input;
        const NAME: &'static str = "Echo";
        const KIND: ToolKind = ToolKind::External;
        const DESCRIPTION: &'static str = "Say the text back.";
        const READ_ONLY: bool = true;

        fn run<'a>(&'a self, input: Input, _cx: ToolContext) -> BoxFuture<'a, ToolOutcome> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move { ToolOutcome::ok(input.text) })
        }
    }

    fn cx() -> ToolContext {
        ToolContext::new(std::env::temp_dir(), CancelToken::new())
    }

    #[tokio::test]
    async fn input_that_does_not_fit_never_reaches_the_body() {
        let echo = Echo(AtomicUsize::new(0));
        let got = echo.call(json!({"text": ["a list"]}), cx()).await;
        let want = parse_input::<Input>("Echo", &json!({"text": ["a list"]}))
            .err()
            .unwrap();
        assert_eq!(got, ToolOutcome::failed(want.to_string()));
        assert!(
            got.text().starts_with("Invalid input for Echo: `text`"),
            "{got:?}"
        );
        assert_eq!(echo.0.load(Ordering::SeqCst), 0);
        let ok = echo.call(json!({"text": "hi"}), cx()).await;
        assert_eq!(ok, ToolOutcome::ok("hi"));
        assert_eq!(echo.0.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn the_tool_is_offered_from_its_constants_and_input_type() {
        let echo: &dyn Tool = &Echo(AtomicUsize::new(0));
        assert_eq!((echo.name(), echo.kind()), ("Echo", ToolKind::External));
        assert_eq!(echo.description(), "Say the text back.");
        assert_eq!(echo.input_schema(), input_schema::<Input>());
        assert_eq!(echo.input_schema()["required"], json!(["text"]));
        assert!(echo.is_read_only(&json!({})));
    }
}
