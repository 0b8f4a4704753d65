//! The store contract: the behaviour every implementation of the store ports keeps,
//! written once as async functions generic over the store and run by each backend's
//! test binary (`crates/adapters/sqlite/tests/contract.rs` for SQLite,
//! `crates/adapters/postgres/tests/contract.rs` for PostgreSQL) through
//! [`store_contract!`]. A test here must hold for every backend; what only one can
//! show (SQLite's file checks, PostgreSQL's cross-process invariants) stays in that
//! backend's own tests.
//!
//! Each test gets a fresh, empty store and a [`RawSql`] handle on the same database, to
//! act behind the store's back the way an operator or a damaged disk could.

pub mod fixtures;

pub mod approvals;
pub mod audit;
pub mod costs;
pub mod events;
pub mod executions;
pub mod ledger;
pub mod mcp_calls;
pub mod model_calls;
pub mod permissions;
pub mod record_chains;
pub mod replicas;
pub mod responses;
pub mod threads;
pub mod tool_pins;
pub mod turns;
pub mod versions;

pub use fixtures::{Dialect, RawSql, Store};
pub use replicas::ReplicatedStore;

/// Expands to one `#[tokio::test]` per contract test. `$fresh` is an async function
/// returning `Option<(guard, store, raw)>`: `None` skips the test (the backend is not
/// available here); the guard lives until the test ends.
#[macro_export]
macro_rules! store_contract {
    ($fresh:path) => {
        $crate::store_contract!(@each $fresh;
            approvals::an_approval_is_stored_with_its_event_and_listed_for_its_client_only,
            approvals::hash_retention_keeps_arguments_out_of_the_events_but_in_the_approval,
            approvals::a_decision_is_recorded_once_and_claimed_once,
            approvals::an_edit_without_arguments_and_unknown_ids_are_refused,
            approvals::a_suspended_turn_survives_a_restart_and_resumes_after,
            audit::the_chain_holds_under_concurrent_appends_to_many_threads,
            audit::an_edited_event_is_named_by_verify,
            audit::events_claimed_before_the_chain_are_counted_and_the_claim_named,
            record_chains::record_chains_hold_under_concurrency_and_name_an_edit,
            record_chains::a_removed_record_is_named_by_verify,
            record_chains::an_unchained_record_on_a_chained_store_is_named,
            ledger::a_moved_owner_workspace_or_deletion_and_an_inserted_or_removed_thread_are_named,
            ledger::an_edited_turn_approval_or_key_is_named,
            ledger::a_ledger_without_its_genesis_is_named,
            ledger::the_ledger_holds_under_concurrent_threads_keys_and_policy_loads,
            ledger::a_decision_under_a_policy_set_never_loaded_is_named,
            costs::an_empty_store_has_no_costs,
            costs::calls_are_summed_per_agent_client_provider_model_and_day,
            costs::by_turn_splits_rows_per_thread_and_turn,
            costs::filters_select_client_agent_thread_and_time,
            costs::deleted_threads_still_count,
            costs::extreme_numbers_are_exact_and_sums_saturate,
            costs::a_damaged_cost_event_is_reported_not_hidden,
            events::concurrent_appends_get_gapless_seqs_per_thread,
            events::events_survive_closing_and_reopening,
            events::thread_events_pages_by_seq,
            events::hostile_payloads_round_trip_exactly,
            events::a_damaged_row_is_an_error_naming_it,
            events::the_log_refuses_updates_and_deletes,
            executions::each_queued_execution_is_claimed_exactly_once_under_concurrency,
            executions::one_thread_runs_one_execution_at_a_time,
            executions::an_idempotency_key_is_unique_per_client,
            executions::a_finished_execution_never_changes_and_its_delivery_comes_with_it,
            executions::a_retry_is_due_after_its_delay_and_keeps_the_failure,
            executions::cancel_ends_a_queued_execution_and_flags_a_running_one,
            executions::restart_recovery_requeues_or_interrupts_per_mode,
            executions::a_delivery_is_leased_while_in_flight_and_recorded_once_settled,
            mcp_calls::calls_are_listed_per_client_and_by_approval,
            mcp_calls::charged_calls_count_in_costs,
            mcp_calls::recorded_mcp_calls_cannot_be_changed_or_deleted,
            responses::a_kept_response_is_found_by_its_client_only_and_never_changes,
            tool_pins::a_pin_round_trips_exactly_and_is_replaced_whole,
            model_calls::calls_are_summed_with_turn_costs_under_the_same_filters,
            model_calls::an_id_is_recorded_once_and_extremes_are_clamped,
            model_calls::recorded_calls_cannot_be_changed_or_deleted,
            permissions::a_permission_is_created_then_resolved_exactly_once,
            permissions::a_permission_needs_a_running_turn_of_its_thread,
            permissions::a_permission_cannot_be_answered_after_its_turn_ended,
            permissions::a_damaged_permission_row_is_an_error_naming_it,
            permissions::a_restart_declines_pending_permissions_before_ending_the_turn,
            threads::threads_are_listed_per_client_newest_first,
            threads::threads_active_since_spans_every_client,
            threads::a_deleted_thread_is_hidden_but_its_log_stays,
            threads::deleting_a_thread_with_a_running_turn_is_a_conflict,
            threads::writes_to_a_thread_deleted_behind_the_stores_back_are_not_found,
            threads::the_summary_round_trips_and_is_replaced,
            turns::a_thread_is_created_and_read_back_with_hostile_fields,
            turns::a_turn_begins_and_reads_back,
            turns::start_turn_stores_the_turn_and_its_start_together_or_neither,
            turns::begin_turn_on_an_unknown_thread_is_not_found,
            turns::a_second_running_turn_is_a_conflict_until_the_first_ends,
            turns::the_database_itself_refuses_a_second_running_turn,
            turns::complete_turn_records_the_event_and_the_end_together,
            turns::every_stop_reason_reads_back_as_the_turns_status,
            turns::writes_to_an_ended_or_unknown_turn_are_refused,
            turns::turn_completed_cannot_be_smuggled_through_append,
            turns::a_failed_completion_leaves_neither_the_event_nor_the_end,
            turns::turns_left_running_are_interrupted_after_a_reopen,
            turns::the_internal_flag_and_the_result_round_trip,
            turns::a_steps_events_are_stored_together_or_not_at_all,
            turns::the_last_answered_turns_are_read_in_order,
            versions::only_drafts_change_and_stages_move_forward_also_behind_the_stores_back,
            versions::traffic_is_append_only_and_a_stale_change_loses,
            versions::one_agents_versions_are_read_alone_and_in_order,
            versions::a_thread_is_pinned_once_and_its_turns_record_the_version,
            versions::a_thread_created_pinned_keeps_its_version,
        );
    };
    (@each $fresh:path; $($module:ident :: $name:ident,)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                let Some((_guard, store, raw)) = $fresh().await else {
                    return;
                };
                $crate::$module::$name(::std::sync::Arc::new(store), &raw).await;
            }
        )*
    };
}

/// Like [`store_contract!`], for the `ReplicaStore` tests (stores that implement it).
#[macro_export]
macro_rules! replica_contract {
    ($fresh:path) => {
        $crate::store_contract!(@each $fresh;
            replicas::recovery_of_a_replica_touches_only_its_own_turns,
            replicas::claimed_executions_carry_their_replica,
            replicas::the_registry_never_hands_a_replica_itself,
            replicas::the_appended_feed_is_taken_once,
            replicas::cancel_requests_and_orphans_are_kept_for_running_turns_only,
        );
    };
}
