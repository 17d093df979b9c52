//! Multi round-trip requests (MRTR) in the modern era.
//!
//! A primitive that needs client input is simply run again on every round. [`Replay`] answers its
//! questions from what the client sent back (`inputResponses`) and from the answers of earlier
//! rounds, which travel sealed in `requestState` (see `sealing`). When a question has no answer
//! yet, the round ends with an `InputRequiredResult` asking for exactly the missing inputs and a
//! freshly sealed state holding every answer used so far. Because the state is sealed, a client can
//! neither forge earlier answers nor move a state to another request.

use serde_json::{Value, json};

use crate::error::RpcError;
use crate::interaction::{Answers, InputMethod, InputRequest, Interrupt, missing_capability};
use crate::sealing::Sealer;

/// The most input requests one round may carry.
pub const MAX_INPUT_REQUESTS: usize = 16;

/// Answers for one round of a modern request.
#[derive(Debug, Default)]
pub struct Replay {
    /// Answers sealed in the presented `requestState` (earlier rounds).
    sealed: Answers,
    /// Answers the client sent this round.
    fresh: Answers,
    /// Every answer handed to the primitive so far (what the next state must carry).
    used: Answers,
    state_presented: bool,
}

impl Replay {
    /// Reads `inputResponses` and `requestState` from a request's params. `binding` names the
    /// request (method and primitive) the state must have been minted for.
    pub fn from_params(sealer: &Sealer, binding: &str, params: &Value) -> Result<Replay, RpcError> {
        let fresh = match params.get("inputResponses") {
            None => Answers::new(),
            Some(Value::Object(map)) => map.clone(),
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "inputResponses must be an object mapping input keys to responses, found {}",
                    kind_of(other)
                )));
            }
        };
        let (sealed, state_presented) = match params.get("requestState") {
            None => (Answers::new(), false),
            Some(Value::String(state)) => {
                let state = sealer.unseal(binding, state).map_err(|e| {
                    RpcError::invalid_params(format!("requestState was refused: {e}"))
                })?;
                let answers = state
                    .get("answers")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default();
                (answers, true)
            }
            Some(other) => {
                return Err(RpcError::invalid_params(format!(
                    "requestState must be the string the server sent, found {}",
                    kind_of(other)
                )));
            }
        };
        Ok(Replay {
            sealed,
            fresh,
            used: Answers::new(),
            state_presented,
        })
    }

    /// Answers `requests` or stops the round with the ones still missing.
    pub fn take(
        &mut self,
        requests: Vec<InputRequest>,
        client_capabilities: &Value,
    ) -> Result<Answers, Interrupt> {
        if requests.len() > MAX_INPUT_REQUESTS {
            return Err(RpcError::internal(format!(
                "a primitive asked for {} inputs at once; at most {MAX_INPUT_REQUESTS} are allowed",
                requests.len()
            ))
            .into());
        }
        let mut answers = Answers::new();
        let mut missing = Vec::new();
        for request in requests {
            // Earlier rounds win: a client cannot rewrite an answer it already gave.
            let answer = self
                .sealed
                .get(&request.key)
                .or_else(|| self.fresh.get(&request.key))
                .cloned();
            match answer {
                Some(answer) => {
                    validate_answer(&request, &answer)?;
                    self.used.insert(request.key.clone(), answer.clone());
                    answers.insert(request.key, answer);
                }
                None => missing.push(request),
            }
        }
        if missing.is_empty() {
            return Ok(answers);
        }
        if let Some(undeclared) = missing
            .iter()
            .find(|r| client_capabilities.get(r.method.capability()).is_none())
        {
            return Err(missing_capability(undeclared).into());
        }
        Err(Interrupt::NeedInput(missing))
    }

    /// Whether this round came with a verified `requestState`.
    pub fn state_verified(&self) -> bool {
        self.state_presented
    }

    /// The `InputRequiredResult` for `missing`, carrying the answers used so far, sealed.
    pub fn input_required(
        &self,
        sealer: &Sealer,
        binding: &str,
        missing: &[InputRequest],
    ) -> Value {
        let mut requests = serde_json::Map::new();
        for request in missing {
            requests.insert(request.key.clone(), request.to_value());
        }
        let state = sealer.seal(binding, &json!({ "answers": self.used }));
        json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": state,
        })
    }
}

/// Checks that an answer has the shape of the result its request asked for.
pub fn validate_answer(request: &InputRequest, answer: &Value) -> Result<(), RpcError> {
    let ok = match request.method {
        InputMethod::Elicitation => answer
            .get("action")
            .and_then(Value::as_str)
            .is_some_and(|a| matches!(a, "accept" | "decline" | "cancel")),
        InputMethod::Sampling => {
            answer.get("role").is_some_and(Value::is_string) && answer.get("content").is_some()
        }
        InputMethod::Roots => answer.get("roots").is_some_and(Value::is_array),
    };
    if ok {
        Ok(())
    } else {
        let expected = match request.method {
            InputMethod::Elicitation => {
                "an ElicitResult (an object with action accept, decline or cancel)"
            }
            InputMethod::Sampling => "a CreateMessageResult (an object with role and content)",
            InputMethod::Roots => "a ListRootsResult (an object with a roots array)",
        };
        Err(RpcError::invalid_params(format!(
            "inputResponses[{:?}] answers {} and must be {expected}, found {}",
            request.key,
            request.method.as_str(),
            kind_of(answer)
        )))
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    fn ask_name() -> InputRequest {
        InputRequest::new(
            "user_name",
            InputMethod::Elicitation,
            json!({"message": "name?", "requestedSchema": {"type": "object", "properties": {}}}),
        )
    }

    fn caps() -> Value {
        json!({"elicitation": {}})
    }

    #[test]
    fn a_first_round_asks_and_the_retry_answers() {
        let sealer = Sealer::new().unwrap();
        let mut first = Replay::from_params(&sealer, "b", &json!({})).unwrap();
        let Err(Interrupt::NeedInput(missing)) = first.take(vec![ask_name()], &caps()) else {
            panic!("expected a request for input");
        };
        let result = first.input_required(&sealer, "b", &missing);
        assert_eq!(result["resultType"], "input_required");
        assert_eq!(
            result["inputRequests"]["user_name"]["method"],
            "elicitation/create"
        );
        let retry = json!({
            "inputResponses": {"user_name": {"action": "accept", "content": {"name": "A"}}, "extra": 1},
            "requestState": result["requestState"],
        });
        let mut second = Replay::from_params(&sealer, "b", &retry).unwrap();
        let answers = second.take(vec![ask_name()], &caps()).unwrap();
        assert_eq!(answers["user_name"]["content"]["name"], "A");
        assert!(second.state_verified());
    }

    #[test]
    fn bad_shapes_and_undeclared_capabilities_are_errors() {
        let sealer = Sealer::new().unwrap();
        let err = Replay::from_params(&sealer, "b", &json!({"inputResponses": null})).unwrap_err();
        assert_eq!(err.code, -32602);
        let mut replay = Replay::from_params(
            &sealer,
            "b",
            &json!({"inputResponses": {"user_name": 12345}}),
        )
        .unwrap();
        let Err(Interrupt::Failed(e)) = replay.take(vec![ask_name()], &caps()) else {
            panic!("a number is not an ElicitResult");
        };
        assert_eq!(e.code, -32602);
        let mut replay = Replay::from_params(&sealer, "b", &json!({})).unwrap();
        let Err(Interrupt::Failed(e)) = replay.take(vec![ask_name()], &json!({"sampling": {}}))
        else {
            panic!("elicitation was not declared");
        };
        assert_eq!(e.code, -32021);
        assert_eq!(
            e.data.unwrap()["requiredCapabilities"],
            json!({"elicitation": {}})
        );
        let err = Replay::from_params(&sealer, "b", &json!({"requestState": "x.y"})).unwrap_err();
        assert_eq!(err.code, -32602);
    }
}
