//! The userspace host driver (to be written): controller bring-up, queues, PRPs,
//! completions, over any [`crate::transport::Transport`].
