//! The people who run a sale: the role an admin key carries, the operator a request acts for,
//! and the record of what an operator did (the admin audit log).

use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

/// What an admin key may do. Each role may do everything the ones before it may.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Reads: sales, figures, attempts, the audit log, metrics and docs.
    Viewer,
    /// Runs sales: creates them, turns the knobs, changes stock, refunds.
    Operator,
    /// Manages the admin keys.
    Admin,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Operator, Role::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Operator => "operator",
            Role::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    /// Whether a key of this role may do what `needed` may.
    pub fn allows(self, needed: Role) -> bool {
        self >= needed
    }
}

/// The operator a request acts for: the admin key's name and role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operator {
    /// The key's name, written to the audit log as who did it.
    pub name: String,
    pub role: Role,
}

impl Operator {
    /// The name the configured key (`auth.admin_key`) acts under: an `admin` key.
    pub const CONFIGURED: &'static str = "configured";

    pub fn configured() -> Self {
        Operator {
            name: Operator::CONFIGURED.into(),
            role: Role::Admin,
        }
    }
}

/// What an admin action was done to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Sale(super::SaleId),
    Attempt(super::AttemptId),
    AdminKey(String),
    /// A venue layout.
    Layout(Uuid),
    /// A gate in front of a site.
    Gate(Uuid),
}

impl Target {
    /// How the audit log names it: `sale:<id>`, `attempt:<id>`, `admin_key:<name>`,
    /// `layout:<id>`, `gate:<id>`.
    pub fn name(&self) -> String {
        match self {
            Target::Sale(id) => format!("sale:{id}"),
            Target::Attempt(id) => format!("attempt:{id}"),
            Target::AdminKey(name) => format!("admin_key:{name}"),
            Target::Layout(id) => format!("layout:{id}"),
            Target::Gate(id) => format!("gate:{id}"),
        }
    }

    /// The sale it belongs to, if any (an admin key and a layout belong to none).
    pub fn sale(&self) -> Option<super::SaleId> {
        match self {
            Target::Sale(id) => Some(*id),
            Target::Attempt(id) => Some(id.sale),
            Target::AdminKey(_) | Target::Layout(_) | Target::Gate(_) => None,
        }
    }
}

/// One entry of the admin audit log: who did what to what, the target before and after.
#[derive(Clone, Debug, PartialEq)]
pub struct AdminAction {
    /// UUIDv7: the log's order and its pages' cursor.
    pub id: Uuid,
    /// The key's name ([`Operator::name`]).
    pub actor: String,
    /// The operation, by its id in the API (`pauseSale`, `createAdminKey`, …).
    pub action: String,
    /// [`Target::name`].
    pub target: String,
    /// The target's sale, so a sale's log is one filter and its event is keyed by the sale.
    pub sale: Option<super::SaleId>,
    /// The target as read before the action (none when the action created it).
    pub before: Option<Value>,
    /// The target as the action left it.
    pub after: Option<Value>,
    pub at: DateTime<Utc>,
}

impl AdminAction {
    pub fn new(
        actor: &Operator,
        action: &str,
        target: &Target,
        before: Option<Value>,
        after: Option<Value>,
    ) -> Self {
        AdminAction {
            id: Uuid::now_v7(),
            actor: actor.name.clone(),
            action: action.into(),
            target: target.name(),
            sale: target.sale(),
            before,
            after,
            at: Utc::now(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_role_may_do_what_the_ones_before_it_may() {
        for held in Role::ALL {
            for needed in Role::ALL {
                let expected = Role::ALL.iter().position(|r| *r == held)
                    >= Role::ALL.iter().position(|r| *r == needed);
                assert_eq!(held.allows(needed), expected, "{held:?} for {needed:?}");
            }
            assert_eq!(Role::parse(held.as_str()), Some(held));
        }
        assert_eq!(Role::parse("root"), None);
    }
}
