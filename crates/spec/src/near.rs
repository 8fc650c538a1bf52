//! Near misses: the known name a mistyped one was probably meant to be.

/// The name of `known` closest to `name` when `name` is a near miss of it (a typo: at most
/// two edits, and fewer than half the known name's length), so that a message can ask
/// "did you mean …?"; `None` when nothing is that close.
pub fn nearest<'k>(name: &str, known: impl IntoIterator<Item = &'k str>) -> Option<&'k str> {
    known
        .into_iter()
        .map(|known| (strsim::damerau_levenshtein(name, known), known))
        .filter(|(distance, known)| *distance <= 2.min(known.len() / 2).max(1))
        .min()
        .map(|(_, known)| known)
}

/// ` (did you mean `X`?)` for the nearest of `known` to `name`, or nothing.
pub fn did_you_mean<'k>(name: &str, known: impl IntoIterator<Item = &'k str>) -> String {
    nearest(name, known)
        .map(|near| format!(" (did you mean `{near}`?)"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_typo_finds_its_name_and_a_stranger_finds_none() {
        let known = ["retry", "retryWait", "sleep", "sets"];
        assert_eq!(nearest("retrys", known), Some("retry"));
        assert_eq!(nearest("retrywait", known), Some("retryWait"));
        assert_eq!(nearest("slep", known), Some("sleep"));
        assert_eq!(nearest("colour", known), None);
        // Short names take one edit at most: `x` is not a typo of `sets`.
        assert_eq!(nearest("x", known), None);
        assert_eq!(did_you_mean("retrys", known), " (did you mean `retry`?)");
        assert_eq!(did_you_mean("colour", known), "");
    }
}
