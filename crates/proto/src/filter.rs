//! The request search filter of `GET /api/v1/requests` and its query string.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};

use crate::State;

/// Which requests a search returns. Empty fields do not filter.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestFilter {
    pub request_type: Option<String>,
    pub user: Option<String>,
    /// Any of these states (OR).
    pub states: Vec<State>,
    /// Every one of these `name = value` pairs (AND), compared as text.
    pub args: BTreeMap<String, String>,
    /// Created at or after.
    pub since: Option<DateTime<Utc>>,
    /// Created at or before.
    pub until: Option<DateTime<Utc>>,
    /// At most this many requests; 0 means no limit.
    pub limit: u64,
    /// Skip this many; only honoured with a limit. The database walks past every one
    /// skipped: deep pages are slow (use `after`).
    pub offset: u64,
    /// (Spindle) Only requests after this one in the order found (newest first): the
    /// keyset cursor of the page before, its `Spindle-Next` token.
    pub after: Option<Cursor>,
}

/// Where a page of found requests ended: the last request's creation time and id, the
/// order `find` sorts by. As a token (`Spindle-Next`, `after=`) it is
/// `MICROSECONDS.ID`, to be passed back as it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub created_at: DateTime<Utc>,
    pub request_id: String,
}

impl Cursor {
    /// The token that names this cursor.
    pub fn token(&self) -> String {
        format!("{}.{}", self.created_at.timestamp_micros(), self.request_id)
    }

    /// Reads a token made by [`Cursor::token`].
    pub fn parse(token: &str) -> Option<Cursor> {
        let (micros, request_id) = token.split_once('.')?;
        let created_at = DateTime::from_timestamp_micros(micros.parse().ok()?)?;
        let valid = !request_id.is_empty()
            && request_id.len() <= 64
            && request_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        valid.then(|| Cursor {
            created_at,
            request_id: request_id.to_owned(),
        })
    }
}

/// A query parameter that cannot be read; the text is Spin Cycle's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("invalid 'state' parameter: {0:?} is not a valid state name")]
    State(String),
    #[error("invalid 'arg' parameter: '{0}' does not match expected format key=value")]
    Arg(String),
    #[error(
        "invalid '{param}' parameter: {value:?} cannot be parsed to time.Time using RFC3339Nano format: {detail}"
    )]
    Time {
        param: &'static str,
        value: String,
        detail: String,
    },
    #[error(
        "invalid 'after' parameter: {0:?} is not a page's cursor; expected the Spindle-Next token of the page before, as it was given"
    )]
    After(String),
    #[error("invalid '{param}' parameter: {value:?} cannot be parsed to uint: {detail}")]
    Uint {
        param: &'static str,
        value: String,
        detail: String,
    },
}

impl RequestFilter {
    /// Reads a filter from query parameters, in order (`state` and `arg` may repeat).
    /// Unknown parameters are ignored, as in Spin Cycle.
    pub fn from_query<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<RequestFilter, FilterError> {
        let mut filter = RequestFilter::default();
        let mut offset = None;
        for (key, value) in pairs {
            match key {
                "type" => filter.request_type = Some(value.to_owned()).filter(|v| !v.is_empty()),
                "user" => filter.user = Some(value.to_owned()).filter(|v| !v.is_empty()),
                "state" => {
                    let state = value
                        .parse::<State>()
                        .map_err(|_| FilterError::State(value.to_owned()))?;
                    filter.states.push(state);
                }
                "arg" => {
                    let Some((name, arg_value)) = value.split_once('=') else {
                        return Err(FilterError::Arg(value.to_owned()));
                    };
                    filter.args.insert(name.to_owned(), arg_value.to_owned());
                }
                "since" => filter.since = Some(parse_time("since", value)?),
                "until" => filter.until = Some(parse_time("until", value)?),
                "limit" => filter.limit = parse_uint("limit", value)?,
                "offset" => offset = Some(value),
                "after" => {
                    filter.after = Some(
                        Cursor::parse(value).ok_or_else(|| FilterError::After(value.to_owned()))?,
                    );
                }
                _ => {}
            }
        }
        // The offset is only read (and checked) when a limit is given.
        if let Some(value) = offset.filter(|_| filter.limit > 0) {
            filter.offset = parse_uint("offset", value)?;
        }
        Ok(filter)
    }

    /// Encodes the filter as Spin Cycle's client does: form encoding, keys sorted, empty
    /// fields left out.
    pub fn to_query(&self) -> String {
        let mut query = url::form_urlencoded::Serializer::new(String::new());
        if let Some(after) = &self.after {
            query.append_pair("after", &after.token());
        }
        for (name, value) in &self.args {
            query.append_pair("arg", &format!("{name}={value}"));
        }
        if self.limit > 0 {
            query.append_pair("limit", &self.limit.to_string());
        }
        if self.offset > 0 {
            query.append_pair("offset", &self.offset.to_string());
        }
        if let Some(since) = self.since {
            query.append_pair("since", &format_time(since));
        }
        for state in &self.states {
            query.append_pair("state", state.name());
        }
        if let Some(request_type) = &self.request_type {
            query.append_pair("type", request_type);
        }
        if let Some(until) = self.until {
            query.append_pair("until", &format_time(until));
        }
        if let Some(user) = &self.user {
            query.append_pair("user", user);
        }
        query.finish()
    }
}

fn parse_time(param: &'static str, value: &str) -> Result<DateTime<Utc>, FilterError> {
    DateTime::parse_from_rfc3339(value)
        .map(|time| time.with_timezone(&Utc))
        .map_err(|err| FilterError::Time {
            param,
            value: value.to_owned(),
            detail: err.to_string(),
        })
}

fn parse_uint(param: &'static str, value: &str) -> Result<u64, FilterError> {
    value
        .parse()
        .map_err(|err: std::num::ParseIntError| FilterError::Uint {
            param,
            value: value.to_owned(),
            detail: err.to_string(),
        })
}

/// RFC 3339 with as many fraction digits as needed (Go's RFC3339Nano).
fn format_time(time: DateTime<Utc>) -> String {
    let whole = time.to_rfc3339_opts(SecondsFormat::Secs, true);
    let nanos = time.timestamp_subsec_nanos();
    if nanos == 0 {
        return whole;
    }
    let fraction = format!("{nanos:09}");
    let fraction = fraction.trim_end_matches('0');
    format!("{}.{fraction}Z", whole.trim_end_matches('Z'))
}
