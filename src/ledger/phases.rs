//! A sale's phases, the user lists of its list phases and the access codes of its codes
//! phases (`crate::service::phases`).

use async_trait::async_trait;

use super::LedgerResult;
use crate::domain::phase::Phase;
use crate::domain::{AdminAction, Admission, SaleId, UserId};

/// An access code as an operator exports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessCode {
    pub code: String,
    pub max_uses: u32,
    pub used: u32,
}

/// What a phase counted, from the ledger.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PhaseCounts {
    pub admitted: u64,
    pub bought: u64,
    pub members: u64,
    pub codes: u64,
    pub redeemed: u64,
}

/// What redeeming a code came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Redeemed {
    /// The user may join the phase (the code taken now, or by this user before).
    Yes,
    /// No such code in this phase, or it is used up by other users.
    No,
}

#[async_trait]
pub trait PhaseLedger: Send + Sync {
    async fn phases(&self, sale: SaleId) -> LedgerResult<Vec<Phase>>;

    /// Replaces the sale's phases (none has begun: the caller checks), with the operator's
    /// entry in the admin audit log.
    async fn set_phases(
        &self,
        sale: SaleId,
        phases: &[Phase],
        entry: &AdminAction,
    ) -> LedgerResult<()>;

    /// Starts phase `position`: its first serial written (unless its pre-queue wrote it) and
    /// the sale's admission and per-user limit set to the phase's, in one transaction. False
    /// when it had started before.
    async fn begin_phase(
        &self,
        sale: SaleId,
        position: u32,
        first_serial: u64,
        admission: &Admission,
        per_user_limit: u32,
    ) -> LedgerResult<bool>;

    /// Opens lottery phase `position`'s pre-queue: its first serial written. False when it
    /// was open before.
    async fn open_prequeue(
        &self,
        sale: SaleId,
        position: u32,
        first_serial: u64,
    ) -> LedgerResult<bool>;

    /// The sale's line was numbered anew from 1 (the queue store lost it and rebuilt the sale
    /// from this ledger, where nobody waiting is kept): every phase whose first serial was
    /// written now starts at 1, as everyone waiting joined in the phase in effect since. How
    /// many phases changed.
    async fn renumber_phases(&self, sale: SaleId) -> LedgerResult<u64>;

    /// Adds user ids to a list phase (those on it already stay once), in one transaction with
    /// the operator's entry: how many were new, and how many the list holds now. A list that
    /// would hold more than `max` takes none ([`super::LedgerError::TooMany`]).
    async fn add_members(
        &self,
        sale: SaleId,
        position: u32,
        users: &[String],
        max: u64,
        entry: &AdminAction,
    ) -> LedgerResult<(u64, u64)>;

    /// A page of the list, in user id order, after `after`.
    async fn members(
        &self,
        sale: SaleId,
        position: u32,
        after: Option<&str>,
        limit: u32,
    ) -> LedgerResult<Vec<String>>;

    async fn is_member(&self, sale: SaleId, position: u32, user: &UserId) -> LedgerResult<bool>;

    /// The sales not closed that have a list phase: those whose joins a replica's copies of
    /// lists answer (`service::member_lists`).
    async fn sales_with_lists(&self) -> LedgerResult<Vec<SaleId>>;

    async fn add_codes(
        &self,
        sale: SaleId,
        position: u32,
        codes: &[String],
        max_uses: u32,
        max: u64,
        entry: &AdminAction,
    ) -> LedgerResult<()>;

    /// A page of the phase's codes, in code order, after `after`.
    async fn codes(
        &self,
        sale: SaleId,
        position: u32,
        after: Option<&str>,
        limit: u32,
    ) -> LedgerResult<Vec<AccessCode>>;

    /// Whether `user` may join codes phase `position`: they redeemed one of its codes before,
    /// or `code` is one of its codes with a use left, which is then theirs.
    async fn redeem(
        &self,
        sale: SaleId,
        position: u32,
        user: &UserId,
        code: Option<&str>,
    ) -> LedgerResult<Redeemed>;

    /// Per phase, its counts; `ranges` are the serials each phase's joins took.
    async fn phase_counts(
        &self,
        sale: SaleId,
        ranges: &[Option<(u64, u64)>],
    ) -> LedgerResult<Vec<PhaseCounts>>;
}
