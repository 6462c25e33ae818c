//! Which API a request speaks ([`Dialect`]), read from its path: the Messages API, OpenAI's
//! two, and the clouds' routes (the model and, for Bedrock, whether it streams). A leaf: each
//! dialect's module answers in its shape.

/// Which API a request speaks, from its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dialect {
    /// `POST /v1/messages`.
    Messages,
    /// `POST /v1/responses`.
    Responses,
    /// `POST /v1/chat/completions`.
    Chat,
    /// Google Vertex AI: `POST …/projects/{p}/locations/{r}/publishers/anthropic/models/{m}:streamRawPredict`.
    Vertex,
    /// Amazon Bedrock: `POST /model/{id}/invoke-with-response-stream` (or `/invoke`).
    Bedrock,
}

impl Dialect {
    /// The dialect served at `route`, if any.
    pub fn of_route(route: &str) -> Option<Dialect> {
        match route {
            "/v1/messages" => Some(Dialect::Messages),
            "/v1/responses" => Some(Dialect::Responses),
            "/v1/chat/completions" => Some(Dialect::Chat),
            _ => self::route(route).map(|(d, _, _)| d),
        }
    }

    /// The name recorded with each request.
    pub fn name(self) -> &'static str {
        match self {
            Dialect::Messages => "messages",
            Dialect::Responses => "responses",
            Dialect::Chat => "chat",
            Dialect::Vertex => "vertex",
            Dialect::Bedrock => "bedrock",
        }
    }
}

/// The cloud dialect of `route`, with the model it names and whether it streams by its path
/// (Bedrock) — `None` for Vertex, whose body says.
pub(crate) fn route(route: &str) -> Option<(Dialect, String, Option<bool>)> {
    if let Some(rest) = route.strip_prefix("/model/") {
        let (model, verb) = rest.rsplit_once('/')?;
        let stream = match verb {
            "invoke-with-response-stream" => true,
            "invoke" => false,
            _ => return None,
        };
        return Some((Dialect::Bedrock, percent_decode(model)?, Some(stream)));
    }
    let (_, tail) = route.split_once("/projects/")?;
    let (_, model_verb) = tail.split_once("/publishers/anthropic/models/")?;
    let (model, verb) = model_verb.rsplit_once(':')?;
    if !tail.contains("/locations/") || !matches!(verb, "streamRawPredict" | "rawPredict") {
        return None;
    }
    Some((Dialect::Vertex, percent_decode(model)?, None))
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
