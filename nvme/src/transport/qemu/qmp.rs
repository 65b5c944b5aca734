//! A QMP client (QEMU Machine Protocol: JSON messages, one per line, on a UNIX socket).
//!
//! It does the `qmp_capabilities` handshake, sends commands with an `id` and matches the
//! reply by that id, and queues every asynchronous event it reads on the way, so an
//! event that arrives while a command is answered is not lost. Every wait is bounded.

use std::collections::VecDeque;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::socket::{LineSocket, Wait, WaitError};

/// Why a QMP exchange failed, before the caller adds what QEMU's state says about it.
#[derive(Debug)]
pub(crate) enum QmpFailure {
    /// QEMU answered the command with an error.
    Command { class: String, desc: String },
    /// The socket closed or broke: QEMU is gone.
    Closed(Option<std::io::Error>),
    /// Nothing in time.
    Timeout,
    /// A line that is not a QMP message.
    Garbled(String),
}

impl From<WaitError> for QmpFailure {
    fn from(e: WaitError) -> Self {
        match e {
            WaitError::Closed => QmpFailure::Closed(None),
            WaitError::Timeout => QmpFailure::Timeout,
            WaitError::Io(e) => QmpFailure::Closed(Some(e)),
        }
    }
}

pub(crate) struct Qmp {
    sock: LineSocket,
    events: VecDeque<Value>,
    next_id: u64,
    timeout: Duration,
}

impl Qmp {
    /// Reads the greeting and negotiates capabilities (none are asked for).
    pub(crate) fn handshake(stream: UnixStream, timeout: Duration) -> Result<Self, QmpFailure> {
        let mut qmp = Qmp { sock: LineSocket::new(stream), events: VecDeque::new(), next_id: 1, timeout };
        let deadline = Instant::now() + timeout;
        let greeting = qmp.read_message(deadline)?;
        if greeting.get("QMP").is_none() {
            return Err(QmpFailure::Garbled(greeting.to_string()));
        }
        qmp.execute("qmp_capabilities", None)?;
        Ok(qmp)
    }

    /// Runs `command` with `arguments` (a JSON object) and returns its `return` value.
    pub(crate) fn execute(&mut self, command: &str, arguments: Option<Value>) -> Result<Value, QmpFailure> {
        let id = self.next_id;
        self.next_id += 1;
        let mut request = json!({ "execute": command, "id": id });
        if let Some(arguments) = arguments {
            request["arguments"] = arguments;
        }
        let mut line = request.to_string();
        line.push('\n');
        let deadline = Instant::now() + self.timeout;
        self.sock.send(line.as_bytes(), deadline)?;
        loop {
            let message = self.read_message(deadline)?;
            if message.get("event").is_some() {
                self.events.push_back(message);
                continue;
            }
            if message.get("id") != Some(&json!(id)) {
                // A reply to an earlier command that timed out: it no longer has a reader.
                continue;
            }
            if let Some(value) = message.get("return") {
                return Ok(value.clone());
            }
            if let Some(error) = message.get("error") {
                let field = |name: &str| error.get(name).and_then(Value::as_str).unwrap_or("?").to_owned();
                return Err(QmpFailure::Command { class: field("class"), desc: field("desc") });
            }
            return Err(QmpFailure::Garbled(message.to_string()));
        }
    }

    /// Sends `quit` without waiting for the reply (QEMU may close the socket first).
    pub(crate) fn send_quit(&mut self) -> Result<(), QmpFailure> {
        let deadline = Instant::now() + Duration::from_millis(100);
        Ok(self.sock.send(b"{\"execute\": \"quit\"}\n", deadline)?)
    }

    /// The first queued or arriving event named `name` (the whole event object); events
    /// with other names stay queued.
    pub(crate) fn wait_event(&mut self, name: &str, timeout: Duration) -> Result<Value, QmpFailure> {
        if let Some(pos) = self.events.iter().position(|e| e.get("event").and_then(Value::as_str) == Some(name)) {
            if let Some(event) = self.events.remove(pos) {
                return Ok(event);
            }
        }
        let deadline = Instant::now() + timeout;
        loop {
            let message = self.read_message(deadline)?;
            match message.get("event").and_then(Value::as_str) {
                Some(event) if event == name => return Ok(message),
                Some(_) => self.events.push_back(message),
                // A late reply to a command that timed out.
                None => {}
            }
        }
    }

    /// Every event queued so far, oldest first, after reading what has already arrived.
    pub(crate) fn take_events(&mut self) -> Result<Vec<Value>, QmpFailure> {
        while let Some(line) = self.sock.read_line(Wait::Never)? {
            let message = parse(line)?;
            if message.get("event").is_some() {
                self.events.push_back(message);
            }
        }
        Ok(self.events.drain(..).collect())
    }

    fn read_message(&mut self, deadline: Instant) -> Result<Value, QmpFailure> {
        loop {
            match self.sock.read_line(Wait::Until(deadline))? {
                Some(line) if line.trim().is_empty() => continue,
                Some(line) => return parse(line),
                None => return Err(QmpFailure::Timeout),
            }
        }
    }
}

fn parse(line: &str) -> Result<Value, QmpFailure> {
    match serde_json::from_str::<Value>(line) {
        Ok(value) if value.is_object() => Ok(value),
        _ => Err(QmpFailure::Garbled(line.chars().take(200).collect())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader, Write};

    /// A fake QMP server that sends an event before each reply.
    #[test]
    fn replies_match_by_id_and_events_are_queued() {
        let (a, b) = UnixStream::pair().unwrap();
        let server = std::thread::spawn(move || {
            let mut out = b.try_clone().unwrap();
            out.write_all(b"{\"QMP\": {\"version\": {}, \"capabilities\": []}}\r\n").unwrap();
            for line in BufReader::new(b).lines() {
                let request: Value = serde_json::from_str(&line.unwrap()).unwrap();
                let id = request["id"].clone();
                out.write_all(b"{\"event\": \"DEVICE_DELETED\", \"data\": {\"device\": \"n1\"}}\r\n").unwrap();
                let reply = if request["execute"] == "device_del" {
                    json!({"error": {"class": "DeviceNotFound", "desc": "Device 'x' not found"}, "id": id})
                } else {
                    json!({"return": {}, "id": id})
                };
                out.write_all(format!("{reply}\r\n").as_bytes()).unwrap();
            }
        });
        let mut qmp = Qmp::handshake(a, Duration::from_secs(5)).unwrap();
        assert_eq!(qmp.execute("query-status", None).unwrap(), json!({}));
        match qmp.execute("device_del", Some(json!({"id": "x"}))) {
            Err(QmpFailure::Command { class, .. }) => assert_eq!(class, "DeviceNotFound"),
            other => panic!("expected a command error, got {other:?}"),
        }
        let event = qmp.wait_event("DEVICE_DELETED", Duration::from_secs(1)).unwrap();
        assert_eq!(event["data"]["device"], "n1");
        assert_eq!(qmp.take_events().unwrap().len(), 2);
        assert!(matches!(qmp.wait_event("DEVICE_DELETED", Duration::from_millis(50)), Err(QmpFailure::Timeout)));
        drop(qmp);
        server.join().unwrap();
    }
}
