//! "It's your turn" by Web Push: the server's key a page subscribes with, and a waiting
//! attempt's subscription (`crate::notify` sends the message when the turn comes).

use poem_openapi::param::Path;
use poem_openapi::payload::Json;
use poem_openapi::{ApiResponse, Enum, Object, OpenApi};

use super::problem::ApiError;
use super::security::UserAuth;
use super::text::Text;
use super::{parse_attempt_id, ApiTags};
use crate::notify::web_push::Subscription;
use crate::service::{self, App, ServiceError};

pub struct NotificationsApi {
    pub app: App,
}

#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct WebPushKeyOut {
    /// The VAPID public key (base64url, uncompressed P-256): `applicationServerKey` of
    /// `PushManager.subscribe`.
    pub public_key: String,
}

#[derive(ApiResponse)]
pub enum WebPushKeyResponse {
    #[oai(status = 200)]
    Ok(Json<WebPushKeyOut>),
}

/// The keys of a push subscription, as the browser gives them.
#[derive(Debug, Clone, Object)]
pub struct PushKeysIn {
    /// The browser's P-256 public key, base64url.
    #[oai(validator(min_length = 80, max_length = 100))]
    pub p256dh: Text,
    /// The browser's authentication secret, base64url.
    #[oai(validator(min_length = 16, max_length = 32))]
    pub auth: Text,
}

/// The language the notification is worded in.
#[derive(Debug, Clone, Copy, Enum, Default)]
#[oai(rename_all = "lowercase")]
pub enum NotificationLanguage {
    #[default]
    En,
    Ko,
}

/// A browser's push subscription: `PushSubscription.toJSON()`, and the page's language.
#[derive(Debug, Clone, Object)]
#[oai(example)]
pub struct PushSubscriptionIn {
    /// The push service's URL; it must be on a push service this sluice sends to
    /// (`notify.web_push_hosts`).
    #[oai(validator(min_length = 1, max_length = 2048))]
    pub endpoint: Text,
    pub keys: PushKeysIn,
    /// Ignored: a push service that ends the subscription answers 410, and nothing is sent.
    #[oai(rename = "expirationTime", skip_serializing_if_is_none)]
    pub expiration_time: Option<f64>,
    #[oai(default)]
    pub lang: NotificationLanguage,
}

impl poem_openapi::types::Example for WebPushKeyOut {
    fn example() -> Self {
        WebPushKeyOut {
            public_key: "BNbxGYNMhEIi9zrneh7mqV4oUanjLUK3m-mYZBc62frMKrEoMk88r3Lk596T0ck9xlT-\
                         aHXgpq0Ewa1DR3Q1W-Y"
                .into(),
        }
    }
}

impl poem_openapi::types::Example for PushSubscriptionIn {
    fn example() -> Self {
        PushSubscriptionIn {
            endpoint: Text::from("https://fcm.googleapis.com/fcm/send/dXx2q9Yk1dE:APA91bH4"),
            keys: PushKeysIn {
                p256dh: Text::from(
                    "BCVxsr7N_eNgVRqvHtD0zTZsEc6-VV-JvLexhqUzORcxaOzi6-AYWXvTBHm4bjyPjs7Vd8pZGH6SRpkNtoIAiw4",
                ),
                auth: Text::from("BTBZMqHH6r4Tts7J_aSIgg"),
            },
            expiration_time: None,
            lang: NotificationLanguage::Ko,
        }
    }
}

#[derive(ApiResponse)]
pub enum SubscribedResponse {
    /// Kept: the push message goes out when the attempt is admitted, once.
    #[oai(status = 204)]
    Subscribed,
}

#[OpenApi(tag = "ApiTags::Attempts")]
impl NotificationsApi {
    /// The Web Push key
    ///
    /// The server key a page subscribes to Web Push with; 404 when this sluice sends no Web
    /// Push (`notify.vapid_private_key` unset).
    #[oai(
        path = "/v1/web-push/key",
        method = "get",
        operation_id = "getWebPushKey"
    )]
    async fn key(&self) -> Result<WebPushKeyResponse, ApiError> {
        let notify = &self.app.config.notify;
        if notify.vapid_private_key.is_empty() {
            return Err(ServiceError::NotFound("web push on this sluice").into());
        }
        // Checked at start to be the private key's pair.
        let public_key = notify.vapid_public_key.trim_end_matches('=').to_owned();
        Ok(WebPushKeyResponse::Ok(Json(WebPushKeyOut { public_key })))
    }

    /// Be told when it is your turn
    ///
    /// Leaves a Web Push subscription with a waiting attempt: when the attempt is admitted,
    /// the replica that admits sends one push message (`attempt.admitted`, the attempt, when
    /// its admission ends and the page to come back to), even with the tab suspended. A second
    /// subscription replaces the first. 409 when the attempt no longer waits.
    #[oai(
        path = "/v1/attempts/:attempt_id/web-push",
        method = "put",
        operation_id = "subscribeWebPush"
    )]
    async fn subscribe(
        &self,
        auth: UserAuth,
        attempt_id: Path<Text>,
        body: Json<PushSubscriptionIn>,
    ) -> Result<SubscribedResponse, ApiError> {
        let id = parse_attempt_id(&attempt_id)?;
        let body = body.0;
        let subscription = Subscription {
            endpoint: body.endpoint.into_inner(),
            p256dh: body.keys.p256dh.into_inner(),
            auth: body.keys.auth.into_inner(),
            lang: match body.lang {
                NotificationLanguage::En => "en",
                NotificationLanguage::Ko => "ko",
            }
            .to_owned(),
        };
        service::web_push::subscribe(&self.app, id, &auth.0, subscription).await?;
        Ok(SubscribedResponse::Subscribed)
    }
}
