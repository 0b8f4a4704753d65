//! The post-turn audit: compares the tool calls a turn made with the policies in force
//! when it ended.
