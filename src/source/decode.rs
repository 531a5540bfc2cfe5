//! (in progress)
use super::{Exchange, Request, Response, SourceError};

/// Turn a raw exchange into a response, or a clear error.
pub fn decode(url: &str, req: &Request, ex: &Exchange) -> Result<Response, SourceError> {
    let _ = (url, req, ex);
    Err(SourceError::Other { detail: "decoder not written yet".into() })
}
