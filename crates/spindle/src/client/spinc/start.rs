//! Starting a request: the request types (no command), a request type's help, and
//! `start` with its prompts for missing args.

use super::*;

/// No command: the request types the server offers.
pub(crate) async fn list(args: &ClientArgs) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let specs = text_of!(args, client.request_list().await);
    out!("Request Manager address: {}\n\nRequests:", client.addr);
    for spec in &specs {
        out!("  {}", spec.name);
    }
    out!("\nspindle help  <request>\nspindle start <request>");
    Ok(Exit::Success)
}

/// `help <request>`: its args.
pub(crate) async fn help_request(args: &ClientArgs, name: &str) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let specs = match client.request_list().await {
        Ok(specs) => specs,
        Err(err) => return Ok(fail(&err)),
    };
    let Some(spec) = specs.iter().find(|spec| spec.name == name) else {
        crate::exit::eprintln_failure(&format!(
            "'{name}' is not a command or a request type; run `spindle --help` for commands, or `spindle` for request types"
        ));
        return Ok(Exit::NotFound);
    };
    if args.output() == Output::Json {
        print_json(spec)?;
        return Ok(Exit::Success);
    }
    out!(
        "Request Manager address: {}\n\n{name} request args (* required)\n",
        client.addr
    );
    let width = spec.args.iter().map(|a| a.name.len()).max().unwrap_or(0);
    for arg in &spec.args {
        let required = arg.arg_type == RequestArgType::Required;
        let mut line = format!(
            "  {} {:width$}  {}",
            if required { '*' } else { ' ' },
            arg.name,
            arg.desc
        );
        if !required {
            line.push_str(&format!(" (default: {})", text_of(&arg.default)));
        }
        out!("{}", line.trim_end());
    }
    out!("\nTo start a {name} request, run 'spindle start {name}'");
    Ok(Exit::Success)
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Reads a line from stdin after printing a prompt on stderr.
fn ask(prompt: &str) -> anyhow::Result<String> {
    let mut stderr = std::io::stderr().lock();
    write!(stderr, "{prompt}")?;
    stderr.flush()?;
    let mut line = String::new();
    if std::io::stdin().lock().read_line(&mut line)? == 0 {
        anyhow::bail!("no more input");
    }
    Ok(line.trim().to_owned())
}

#[derive(Debug, Clone, clap::Args)]
pub(crate) struct StartArgs {
    /// The request type
    request: String,
    /// Request args as name=value (a JSON list or object value is passed as such);
    /// name=@FILE reads it from a file (one value a line, or a JSON list; @- for standard
    /// input, @@ for a value that begins with @)
    args: Vec<String>,
    /// Start without asking for confirmation
    #[arg(long, short = 'y')]
    yes: bool,
    /// Then watch it until it ends (exit code as for `watch`)
    #[arg(long)]
    watch: bool,
    /// Its place in the queues of the locks its type declares: higher is served first
    /// (default: the type's `priority:`, else 0)
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i32>,
}

/// `start <request> [name=value ...]`: prompts for missing args on a terminal, confirms,
/// creates the request.
// Long because it is `spinc start`'s dialogue in order: the request type's args from the
// server, what was given checked against them, prompts for the missing ones, the
// confirmation, then the create and what to print.
pub(crate) async fn start(args: &ClientArgs, start: &StartArgs) -> anyhow::Result<Exit> {
    let client = args.client()?;
    let mut given = crate::args::parse_request_args(&start.args)?;
    let specs = match client.request_list().await {
        Ok(specs) => specs,
        Err(err) => return Ok(fail(&err)),
    };
    let Some(spec) = specs.iter().find(|spec| spec.name == start.request) else {
        crate::exit::eprintln_failure(&format!(
            "unknown request type `{}`{}; run `spindle` to list request types",
            start.request,
            spec::near::did_you_mean(&start.request, specs.iter().map(|s| s.name.as_str()))
        ));
        return Ok(Exit::NotFound);
    };
    let unknown: Vec<&String> = given
        .keys()
        .filter(|name| !spec.args.iter().any(|a| &a.name == *name))
        .collect();
    if !unknown.is_empty() {
        let names: Vec<String> = unknown
            .iter()
            .map(|name| {
                let known = spec.args.iter().map(|a| a.name.as_str());
                format!("{name}{}", spec::near::did_you_mean(name, known))
            })
            .collect();
        crate::exit::eprintln_failure(&format!(
            "unknown request args: {}; run `spindle help {}` to list its args",
            names.join(", "),
            start.request
        ));
        return Ok(Exit::Usage);
    }
    let interactive = std::io::stdin().is_terminal();
    let prompt_all = given.is_empty();
    for arg in &spec.args {
        let required = arg.arg_type == RequestArgType::Required;
        if given.contains_key(&arg.name) || (!required && !prompt_all) {
            continue;
        }
        if !interactive {
            if required {
                let missing: Vec<&str> = spec
                    .args
                    .iter()
                    .filter(|a| {
                        a.arg_type == RequestArgType::Required && !given.contains_key(&a.name)
                    })
                    .map(|a| a.name.as_str())
                    .collect();
                crate::exit::eprintln_failure(&format!(
                    "missing required args: {}; give them as name=value (stdin is not a terminal, so there is no prompt)",
                    missing.join(", ")
                ));
                return Ok(Exit::Usage);
            }
            continue;
        }
        let default = text_of(&arg.default);
        let mut comment = format!("\n# {}", arg.desc);
        if !default.is_empty() {
            comment.push_str(&format!(" (default: {default})"));
        }
        eprintln_line(&comment)?;
        loop {
            let value = ask(&format!("{}=", arg.name))?;
            if value.is_empty() && required {
                eprintln_line(&format!("# Value required for {}", arg.name))?;
                continue;
            }
            if !value.is_empty() {
                given.insert(
                    arg.name.clone(),
                    crate::args::parse_request_args(&[format!("{}={value}", arg.name)])?[&arg.name]
                        .clone(),
                );
            }
            break;
        }
    }
    if interactive && !start.yes {
        // The re-run hint lists args in spec order, as spinc does.
        let pairs: Vec<String> = spec
            .args
            .iter()
            .filter_map(|arg| given.get(&arg.name).map(|value| arg_pair(&arg.name, value)))
            .collect();
        eprintln_line(&format!(
            "\n# spindle start {} {}\n",
            start.request,
            pairs.join(" ")
        ))?;
        // spinc's `ok`, and the `y`/`yes` people type out of habit.
        while !matches!(
            ask("Enter 'ok' to start, or ctrl-c to abort: ")?
                .to_ascii_lowercase()
                .as_str(),
            "ok" | "y" | "yes"
        ) {}
    }
    let create_request = CreateRequest {
        request_type: start.request.clone(),
        args: given,
        user: crate::client::api::caller(),
        priority: start.priority,
        idempotency_key: Some(crate::client::api::idempotency_key()),
    };
    let request = match client.create(&create_request).await {
        Ok(request) => request,
        Err(err) => return Ok(fail_or_usage(&err)),
    };
    if args.output() == Output::Json {
        print_json(&request)?;
    } else {
        out!("OK, started {} request {}", start.request, request.id);
        // Created, but waiting (for a lock its type declares) or failed for one.
        if !request.error.is_empty() {
            eprintln_line(&format!("  {}: {}", request.state, request.error))?;
        }
        eprintln_line(&format!("\n  spindle status {}\n", request.id))?;
    }
    if start.watch {
        return watch(args, &request.id).await;
    }
    Ok(Exit::Success)
}
