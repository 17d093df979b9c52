//! One server's OAuth client at run time: the tokens in use, and the flow that obtains new ones
//! when the server challenges (401) or asks for more scope (403 `insufficient_scope`).
//!
//! The state is shared by every clone and every connection to the server, and flows are
//! serialised: when several requests hit a 401 at once, one discovers, registers and obtains a
//! token while the others wait and then retry with it. Loops are bounded three ways: each request
//! authorizes at most once per challenge kind ([`super::request`]), a token the server rejects
//! right after it was issued is an error rather than a reason to authorize again, and a scope set
//! that was already obtained and still refused is not asked for again.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use url::Url;

use super::challenge::{BearerChallenge, split_scopes};
use super::consent::{self, AuthorizationParams, ConsentDriver};
use super::error::AuthError;
use super::http::AuthHttp;
use super::registration::{self, ClientOrigin, ClientRegistration};
use super::resource::{self, canonical_resource, resource_covers};
use super::server_metadata::{self, AuthServerMetadata};
use super::settings::{Grant, OAuthSettings};
use super::store::{STORE_VERSION, StoredCredentials, TokenStore};
use super::token::{self, GrantRequest};
use crate::connection::lock;

/// The scope a refresh token is for, asked for when the authorization server lists it.
pub const OFFLINE_ACCESS: &str = "offline_access";

/// Where one connection's requests go, for the flows its challenges start.
pub(crate) struct Binding {
    pub http: AuthHttp,
    pub server_url: Url,
    pub server: String,
}

/// The tokens in use and how they came.
#[derive(Clone)]
struct Current {
    credentials: StoredCredentials,
    /// Obtained by this process and not yet accepted by the server.
    fresh: bool,
    /// The server answered a request that carried it with something other than 401.
    accepted: bool,
}

#[derive(Default)]
struct FlowState {
    /// Client identities obtained in this process, each bound to its issuer.
    registrations: Vec<ClientRegistration>,
    /// Scope sets obtained and still refused with `insufficient_scope`.
    tried_scopes: HashSet<String>,
    /// Access tokens given up on (refused, or expired beyond renewal), so that a stored copy
    /// is not picked up again.
    dropped: Vec<String>,
}

/// How many given-up tokens are remembered.
const MAX_DROPPED: usize = 8;

impl FlowState {
    fn dropped(&mut self, token: &str) {
        if self.dropped.len() >= MAX_DROPPED {
            self.dropped.remove(0);
        }
        self.dropped.push(token.to_owned());
    }
}

struct Shared {
    flow: tokio::sync::Mutex<FlowState>,
    current: Mutex<Option<Current>>,
    loaded: AtomicBool,
}

/// What the server and its authorization server said, validated.
struct Discovered {
    resource: String,
    issuer: String,
    metadata: AuthServerMetadata,
    resource_scopes: Option<Vec<String>>,
}

/// The result of `manifold login`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoginSummary {
    pub issuer: String,
    pub resource: String,
    pub scope: Option<String>,
    pub expires_at: Option<u64>,
    pub refreshable: bool,
    /// Where the credentials were stored, when there is a store.
    pub stored_at: Option<String>,
}

/// One server's OAuth client: settings, optional persistence and consent, shared state.
#[derive(Clone)]
pub struct OAuthClient {
    settings: Arc<OAuthSettings>,
    store: Option<(Arc<dyn TokenStore>, String)>,
    consent: Option<Arc<dyn ConsentDriver>>,
    shared: Arc<Shared>,
}

impl OAuthClient {
    pub fn new(settings: OAuthSettings) -> OAuthClient {
        OAuthClient {
            settings: Arc::new(settings),
            store: None,
            consent: None,
            shared: Arc::new(Shared {
                flow: tokio::sync::Mutex::new(FlowState::default()),
                current: Mutex::new(None),
                loaded: AtomicBool::new(false),
            }),
        }
    }

    pub fn settings(&self) -> &OAuthSettings {
        &self.settings
    }

    /// The same client (sharing its state), persisting under `server`'s name in `store`.
    pub fn with_store(&self, store: Arc<dyn TokenStore>, server: &str) -> OAuthClient {
        let mut c = self.clone();
        c.store = Some((store, server.to_owned()));
        c.shared.loaded.store(false, Ordering::Release);
        c
    }

    pub fn has_store(&self) -> bool {
        self.store.is_some()
    }

    /// The same client (sharing its state), able to ask a user for consent.
    pub fn with_consent(&self, consent: Arc<dyn ConsentDriver>) -> OAuthClient {
        let mut c = self.clone();
        c.consent = Some(consent);
        c
    }

    fn current(&self) -> Option<Current> {
        lock(&self.shared.current).clone()
    }

    fn set_current(&self, credentials: StoredCredentials, fresh: bool) {
        *lock(&self.shared.current) = Some(Current {
            credentials,
            fresh,
            accepted: false,
        });
    }

    /// Gives up on the current token.
    fn drop_current(&self, flow: &mut FlowState) {
        if let Some(c) = lock(&self.shared.current).take() {
            flow.dropped(&c.credentials.tokens.access_token);
        }
    }

    /// The server answered a request that carried `token` without refusing it.
    pub(crate) fn accepted(&self, token: &str) {
        if let Some(c) = lock(&self.shared.current).as_mut()
            && c.credentials.tokens.access_token == token
        {
            c.accepted = true;
            c.fresh = false;
        }
    }

    async fn stored(&self, binding: &Binding) -> Option<StoredCredentials> {
        let (store, name) = self.store.as_ref()?;
        match store.load(name).await {
            Ok(Some(c)) if resource_covers(&c.resource, &binding.server_url) => Some(c),
            Ok(Some(_)) => {
                tracing::info!(server = %binding.server, "stored credentials are for another resource (the URL changed?); not used");
                None
            }
            Ok(None) => None,
            Err(e) => {
                tracing::warn!(server = %binding.server, error = %e, "stored credentials could not be read");
                None
            }
        }
    }

    async fn persist(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let saved = match &self.store {
            Some((store, name)) => store.save(name, &credentials).await,
            None => Ok(()),
        };
        self.set_current(credentials, true);
        saved
    }

    /// Persists, logging (not failing) when the store cannot be written: the token still works
    /// for this process.
    async fn persist_quietly(&self, binding: &Binding, credentials: StoredCredentials) {
        if let Err(e) = self.persist(credentials).await {
            tracing::warn!(server = %binding.server, error = %e, "new tokens could not be stored; they will be lost at exit");
        }
    }

    async fn ensure_loaded(&self, binding: &Binding) {
        if self.shared.loaded.load(Ordering::Acquire) {
            return;
        }
        let _flow = self.shared.flow.lock().await;
        if self.shared.loaded.load(Ordering::Acquire) {
            return;
        }
        if self.current().is_none()
            && let Some(c) = self.stored(binding).await
        {
            self.set_current(c, false);
        }
        self.shared.loaded.store(true, Ordering::Release);
    }

    /// The access token to send, refreshed first when it is about to expire.
    pub(crate) async fn bearer(&self, binding: &Binding) -> Option<String> {
        self.ensure_loaded(binding).await;
        let current = self.current()?;
        if !current.credentials.tokens.expires_soon(token::now()) {
            return Some(current.credentials.tokens.access_token);
        }
        let mut flow = self.shared.flow.lock().await;
        let current = self.current()?;
        if !current.credentials.tokens.expires_soon(token::now()) {
            return Some(current.credentials.tokens.access_token);
        }
        match self.renew(binding, &current.credentials).await {
            Ok(renewed) => {
                let token = renewed.tokens.access_token.clone();
                self.persist_quietly(binding, renewed).await;
                Some(token)
            }
            Err(e) => {
                tracing::info!(server = %binding.server, error = %e, "the access token expired and could not be renewed; the server will be asked again");
                self.drop_current(&mut flow);
                None
            }
        }
    }

    /// A new access token without the user: the refresh token, or the client credentials grant.
    async fn renew(
        &self,
        binding: &Binding,
        old: &StoredCredentials,
    ) -> Result<StoredCredentials, AuthError> {
        let endpoint = binding
            .http
            .url(&old.token_endpoint, "the token endpoint")?;
        let tokens = match (&old.tokens.refresh_token, self.settings.grant) {
            (Some(refresh_token), _) => {
                token::request(
                    &binding.http,
                    &endpoint,
                    &old.client,
                    GrantRequest::Refresh { refresh_token },
                    &old.resource,
                    old.tokens.requested_scope.as_deref(),
                    Some(refresh_token),
                )
                .await?
            }
            (None, Grant::ClientCredentials) => {
                let scope = old.tokens.requested_scope.as_deref();
                token::request(
                    &binding.http,
                    &endpoint,
                    &old.client,
                    GrantRequest::ClientCredentials { scope },
                    &old.resource,
                    scope,
                    None,
                )
                .await?
            }
            (None, Grant::AuthorizationCode) => {
                return Err(AuthError::Rejected {
                    detail:
                        "the token expired and the authorization server issued no refresh token"
                            .to_owned(),
                });
            }
        };
        Ok(StoredCredentials {
            tokens,
            ..old.clone()
        })
    }

    /// Handles a 401 to a request that carried `used` (or no token): obtains a token to retry
    /// with, or says why there is none.
    pub(crate) async fn unauthorized(
        &self,
        binding: &Binding,
        challenge: &BearerChallenge,
        used: Option<&str>,
    ) -> Result<(), AuthError> {
        let mut flow = self.shared.flow.lock().await;
        let current = self.current();
        let current_token = current
            .as_ref()
            .map(|c| c.credentials.tokens.access_token.as_str());
        if current_token.is_some() && current_token != used {
            // Another request obtained a token meanwhile: retry with it.
            return Ok(());
        }
        if let Some(c) = &current
            && c.fresh
            && !c.accepted
        {
            self.drop_current(&mut flow);
            return Err(AuthError::Rejected {
                detail: format!(
                    "the server rejected the token {} had just issued for {} (HTTP 401{}); the server and its authorization server disagree about this resource",
                    c.credentials.issuer,
                    c.credentials.resource,
                    challenge
                        .error_description
                        .as_deref()
                        .map(|d| format!(": {d}"))
                        .unwrap_or_default()
                ),
            });
        }
        // Another process (`manifold login`) may have stored newer credentials.
        if let Some(stored) = self.stored(binding).await
            && Some(stored.tokens.access_token.as_str()) != used
            && !flow.dropped.contains(&stored.tokens.access_token)
            && !stored.tokens.expires_soon(token::now())
        {
            self.set_current(stored, false);
            return Ok(());
        }
        let discovered = self.discover(binding, challenge).await?;
        let previous = current
            .map(|c| c.credentials)
            .filter(|c| c.issuer == discovered.issuer && c.resource == discovered.resource);
        if let Some(prev) = &previous
            && prev.tokens.refresh_token.is_some()
            && covers(prev, &challenge.scopes())
        {
            match self.renew(binding, prev).await {
                Ok(renewed) => {
                    self.persist_quietly(binding, renewed).await;
                    return Ok(());
                }
                Err(e) => {
                    tracing::info!(server = %binding.server, error = %e, "refreshing the token failed; authorizing again");
                }
            }
        }
        let prior = previous
            .as_ref()
            .and_then(|p| p.tokens.requested_scope.as_deref());
        let scope = self.select_scope(&challenge.scopes(), prior, &discovered);
        if let Some(u) = used {
            flow.dropped(u);
        }
        *lock(&self.shared.current) = None;
        let credentials = self.obtain(binding, &mut flow, &discovered, scope).await?;
        self.persist_quietly(binding, credentials).await;
        Ok(())
    }

    /// Handles a 403 `insufficient_scope` to a request that carried `used`. `Ok(true)`: retry
    /// with the new token; `Ok(false)`: asking again cannot help, pass the refusal on.
    pub(crate) async fn insufficient_scope(
        &self,
        binding: &Binding,
        challenge: &BearerChallenge,
        used: &str,
    ) -> Result<bool, AuthError> {
        let mut flow = self.shared.flow.lock().await;
        let Some(current) = self.current() else {
            return Ok(false);
        };
        if current.credentials.tokens.access_token != used {
            return Ok(true);
        }
        let challenged = challenge.scopes();
        if challenged.is_empty() || covers(&current.credentials, &challenged) {
            return Ok(false);
        }
        let prior = current.credentials.tokens.requested_scope.clone();
        let discovered = self.discover(binding, challenge).await?;
        let scope = self.select_scope(&challenged, prior.as_deref(), &discovered);
        let key = scope_key(scope.as_deref());
        if !flow.tried_scopes.insert(key) {
            return Ok(false);
        }
        let credentials = self.obtain(binding, &mut flow, &discovered, scope).await?;
        self.persist_quietly(binding, credentials).await;
        Ok(true)
    }

    /// The specification's scope selection: configured scopes, plus the challenge's (with what
    /// was asked for before, so a step-up keeps earlier permissions), else what the resource
    /// lists; `offline_access` when the authorization server offers refresh that way.
    fn select_scope(
        &self,
        challenged: &[String],
        prior: Option<&str>,
        discovered: &Discovered,
    ) -> Option<String> {
        let mut scopes: Vec<String> = Vec::new();
        add_scopes(
            &mut scopes,
            self.settings.scopes.clone().unwrap_or_default(),
        );
        let prior = prior.map(split_scopes).unwrap_or_default();
        if !challenged.is_empty() {
            add_scopes(&mut scopes, prior);
            add_scopes(&mut scopes, challenged.to_vec());
        } else if !prior.is_empty() {
            add_scopes(&mut scopes, prior);
        } else if let Some(listed) = &discovered.resource_scopes {
            add_scopes(&mut scopes, listed.clone());
        }
        if self.settings.grant == Grant::AuthorizationCode
            && !scopes.is_empty()
            && discovered.metadata.lists_scope(OFFLINE_ACCESS)
        {
            add_scopes(&mut scopes, vec![OFFLINE_ACCESS.to_owned()]);
        }
        (!scopes.is_empty()).then(|| scopes.join(" "))
    }

    async fn discover(
        &self,
        binding: &Binding,
        challenge: &BearerChallenge,
    ) -> Result<Discovered, AuthError> {
        let found = resource::discover(
            &binding.http,
            &binding.server_url,
            challenge.resource_metadata.as_deref(),
        )
        .await?;
        let without_resource_metadata = found.is_none();
        let (resource, issuer, resource_scopes) = match found {
            Some(prm) => {
                let issuer = prm
                    .authorization_servers
                    .first()
                    .cloned()
                    .unwrap_or_default();
                (prm.resource, issuer, prm.scopes_supported)
            }
            None => {
                // A 2025-03-26 server: its own origin is its authorization server.
                let origin = binding.server_url.origin().ascii_serialization();
                tracing::debug!(server = %binding.server, issuer = %origin, "no protected resource metadata; trying the server's origin as its authorization server");
                (canonical_resource(&binding.server_url), origin, None)
            }
        };
        let metadata = match server_metadata::discover(&binding.http, &issuer).await {
            Ok(m) => m,
            Err(AuthError::NoServerMetadata {
                tried, mismatch, ..
            }) if without_resource_metadata => {
                let resource_urls: Vec<String> = resource::well_known_urls(&binding.server_url)
                    .iter()
                    .map(Url::to_string)
                    .collect();
                return Err(AuthError::NoResourceMetadata {
                    tried: format!("{}, {tried}", resource_urls.join(", ")),
                    mismatch,
                });
            }
            Err(e) => return Err(e),
        };
        if let Some(current) = self.current()
            && current.credentials.issuer != metadata.issuer
            && current.credentials.client.origin == ClientOrigin::Configured
            && self.consent.is_none()
        {
            return Err(AuthError::Rejected {
                detail: format!(
                    "the server now names the authorization server {:?}, but the configured client_id was used with {:?}; pre-registered credentials belong to one authorization server: check the configuration, then run `manifold login {}`",
                    metadata.issuer, current.credentials.issuer, binding.server
                ),
            });
        }
        Ok(Discovered {
            resource,
            issuer: metadata.issuer.clone(),
            metadata,
            resource_scopes,
        })
    }

    /// A client identity at the discovered issuer: one obtained before in this process (never
    /// another issuer's), else a new one.
    async fn client_for(
        &self,
        binding: &Binding,
        flow: &mut FlowState,
        discovered: &Discovered,
        redirect_uri: Option<&str>,
    ) -> Result<ClientRegistration, AuthError> {
        let stored = self
            .current()
            .map(|c| c.credentials.client)
            .filter(|c| c.origin == ClientOrigin::Registered);
        if let Some(known) =
            flow.registrations.iter().chain(stored.iter()).find(|r| {
                r.fits(&discovered.issuer, redirect_uri) && self.settings.client_id.is_none()
            })
        {
            return Ok(known.clone());
        }
        let client = registration::obtain(
            &binding.http,
            &self.settings,
            &discovered.metadata,
            redirect_uri,
        )
        .await?;
        if client.origin == ClientOrigin::Registered {
            flow.registrations.push(client.clone());
        }
        Ok(client)
    }

    /// Runs the configured grant against the discovered authorization server.
    async fn obtain(
        &self,
        binding: &Binding,
        flow: &mut FlowState,
        discovered: &Discovered,
        scope: Option<String>,
    ) -> Result<StoredCredentials, AuthError> {
        let metadata = &discovered.metadata;
        let token_endpoint =
            metadata
                .token_endpoint
                .as_deref()
                .ok_or_else(|| AuthError::BadDocument {
                    what: "authorization server metadata".to_owned(),
                    url: discovered.issuer.clone(),
                    detail: "it names no token_endpoint".to_owned(),
                })?;
        let token_endpoint = binding.http.url(token_endpoint, "the token endpoint")?;
        let (client, tokens) = match self.settings.grant {
            Grant::ClientCredentials => {
                let client = self.client_for(binding, flow, discovered, None).await?;
                let tokens = token::request(
                    &binding.http,
                    &token_endpoint,
                    &client,
                    GrantRequest::ClientCredentials {
                        scope: scope.as_deref(),
                    },
                    &discovered.resource,
                    scope.as_deref(),
                    None,
                )
                .await?;
                (client, tokens)
            }
            Grant::AuthorizationCode => {
                let Some(consent) = self.consent.clone() else {
                    return Err(AuthError::NeedsLogin {
                        server: binding.server.clone(),
                        scopes: scope
                            .as_deref()
                            .map(|s| format!(" (scopes: {s})"))
                            .unwrap_or_default(),
                    });
                };
                if !metadata.supports_s256() {
                    return Err(AuthError::PkceUnsupported {
                        issuer: discovered.issuer.clone(),
                    });
                }
                let endpoint = metadata.authorization_endpoint.as_deref().ok_or_else(|| {
                    AuthError::BadDocument {
                        what: "authorization server metadata".to_owned(),
                        url: discovered.issuer.clone(),
                        detail: "it names no authorization_endpoint".to_owned(),
                    }
                })?;
                let endpoint = binding.http.url(endpoint, "the authorization endpoint")?;
                let redirect_uri = consent.redirect_uri();
                let client = self
                    .client_for(binding, flow, discovered, Some(&redirect_uri))
                    .await?;
                let (url, pending) = consent::authorization_request(
                    &AuthorizationParams {
                        endpoint: &endpoint,
                        client_id: &client.client_id,
                        redirect_uri: &redirect_uri,
                        resource: &discovered.resource,
                        scope: scope.as_deref(),
                    },
                    &discovered.issuer,
                    metadata.authorization_response_iss_parameter_supported == Some(true),
                )?;
                let redirect = consent.obtain(url).await?;
                let code = consent::read_redirect(&redirect, &pending)?;
                let tokens = token::request(
                    &binding.http,
                    &token_endpoint,
                    &client,
                    GrantRequest::AuthorizationCode {
                        code: &code,
                        verifier: &pending.pkce.verifier,
                        redirect_uri: &pending.redirect_uri,
                    },
                    &discovered.resource,
                    scope.as_deref(),
                    None,
                )
                .await?;
                (client, tokens)
            }
        };
        tracing::info!(server = %binding.server, issuer = %discovered.issuer, scope = ?tokens.scope, "obtained an access token");
        Ok(StoredCredentials {
            version: STORE_VERSION,
            resource: discovered.resource.clone(),
            issuer: discovered.issuer.clone(),
            token_endpoint: token_endpoint.to_string(),
            client,
            tokens,
        })
    }

    /// `manifold login`: asks the server how it is protected (an unauthenticated request and its
    /// challenge, else the well-known metadata), runs the full flow whatever is stored, and
    /// stores the result.
    pub(crate) async fn authorize_now(
        &self,
        binding: &Binding,
        challenge: &BearerChallenge,
    ) -> Result<LoginSummary, AuthError> {
        let mut flow = self.shared.flow.lock().await;
        let discovered = self.discover(binding, challenge).await?;
        let scope = self.select_scope(&challenge.scopes(), None, &discovered);
        let credentials = self.obtain(binding, &mut flow, &discovered, scope).await?;
        let summary = LoginSummary {
            issuer: credentials.issuer.clone(),
            resource: credentials.resource.clone(),
            scope: credentials.tokens.scope.clone(),
            expires_at: credentials.tokens.expires_at,
            refreshable: credentials.tokens.refresh_token.is_some(),
            stored_at: self
                .store
                .as_ref()
                .map(|(store, name)| store.describe(name)),
        };
        self.persist(credentials).await?;
        self.shared.loaded.store(true, Ordering::Release);
        Ok(summary)
    }
}

fn add_scopes(scopes: &mut Vec<String>, more: Vec<String>) {
    for s in more {
        if !s.is_empty() && !scopes.contains(&s) {
            scopes.push(s);
        }
    }
}

/// Whether the credentials were asked for (or granted) every scope in `wanted`.
fn covers(credentials: &StoredCredentials, wanted: &[String]) -> bool {
    let mut held: Vec<String> = Vec::new();
    for list in [
        credentials.tokens.requested_scope.as_deref(),
        credentials.tokens.scope.as_deref(),
    ]
    .into_iter()
    .flatten()
    {
        held.extend(split_scopes(list));
    }
    wanted.iter().all(|w| held.contains(w))
}

/// A scope set as a comparable key (order does not matter).
fn scope_key(scope: Option<&str>) -> String {
    let mut parts = scope.map(split_scopes).unwrap_or_default();
    parts.sort();
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::auth::registration::ClientAuthMethod;
    use crate::auth::token::TokenSet;

    fn discovered(resource_scopes: Option<&[&str]>, as_scopes: Option<&[&str]>) -> Discovered {
        Discovered {
            resource: "https://mcp/mcp".to_owned(),
            issuer: "https://as".to_owned(),
            metadata: AuthServerMetadata {
                issuer: "https://as".to_owned(),
                scopes_supported: as_scopes.map(|s| s.iter().map(|x| (*x).to_owned()).collect()),
                ..AuthServerMetadata::default()
            },
            resource_scopes: resource_scopes.map(|s| s.iter().map(|x| (*x).to_owned()).collect()),
        }
    }

    fn client(settings: OAuthSettings) -> OAuthClient {
        OAuthClient::new(settings)
    }

    fn strings(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| (*x).to_owned()).collect()
    }

    #[test]
    fn the_challenge_wins_then_scopes_supported_then_nothing() {
        let c = client(OAuthSettings::default());
        let d = discovered(Some(&["a", "b"]), None);
        assert_eq!(
            c.select_scope(&strings(&["x"]), None, &d).as_deref(),
            Some("x")
        );
        assert_eq!(c.select_scope(&[], None, &d).as_deref(), Some("a b"));
        assert_eq!(c.select_scope(&[], None, &discovered(None, None)), None);
    }

    #[test]
    fn step_up_keeps_what_was_asked_for_before() {
        let c = client(OAuthSettings::default());
        let d = discovered(Some(&["profile"]), None);
        assert_eq!(
            c.select_scope(&strings(&["mcp:write"]), Some("mcp:basic"), &d)
                .as_deref(),
            Some("mcp:basic mcp:write")
        );
        assert_eq!(
            c.select_scope(&[], Some("mcp:basic"), &d).as_deref(),
            Some("mcp:basic")
        );
    }

    #[test]
    fn offline_access_only_where_listed_and_only_for_user_grants() {
        let c = client(OAuthSettings::default());
        let listed = discovered(Some(&["mcp:basic"]), Some(&["mcp:basic", OFFLINE_ACCESS]));
        assert_eq!(
            c.select_scope(&[], None, &listed).as_deref(),
            Some("mcp:basic offline_access")
        );
        let unlisted = discovered(Some(&["mcp:basic"]), Some(&["mcp:basic"]));
        assert_eq!(
            c.select_scope(&[], None, &unlisted).as_deref(),
            Some("mcp:basic")
        );
        let nothing = discovered(None, Some(&[OFFLINE_ACCESS]));
        assert_eq!(c.select_scope(&[], None, &nothing), None);
        let machine = client(OAuthSettings {
            grant: Grant::ClientCredentials,
            ..OAuthSettings::default()
        });
        assert_eq!(
            machine.select_scope(&[], None, &listed).as_deref(),
            Some("mcp:basic")
        );
    }

    #[test]
    fn configured_scopes_come_first_and_are_not_repeated() {
        let c = client(OAuthSettings {
            scopes: Some(strings(&["read", "write"])),
            ..OAuthSettings::default()
        });
        let d = discovered(Some(&["other"]), None);
        assert_eq!(
            c.select_scope(&strings(&["write", "admin"]), None, &d)
                .as_deref(),
            Some("read write admin")
        );
        assert_eq!(
            c.select_scope(&[], None, &d).as_deref(),
            Some("read write other")
        );
    }

    #[test]
    fn coverage_counts_both_requested_and_granted_scopes() {
        let creds = StoredCredentials {
            version: STORE_VERSION,
            resource: "r".to_owned(),
            issuer: "i".to_owned(),
            token_endpoint: "https://as/token".to_owned(),
            client: ClientRegistration {
                issuer: "i".to_owned(),
                client_id: "c".to_owned(),
                client_secret: None,
                auth_method: ClientAuthMethod::None,
                origin: ClientOrigin::Registered,
                redirect_uris: Vec::new(),
            },
            tokens: TokenSet {
                access_token: "t".to_owned(),
                refresh_token: None,
                expires_at: None,
                scope: Some("a".to_owned()),
                requested_scope: Some("a b".to_owned()),
            },
        };
        assert!(covers(&creds, &strings(&["a", "b"])));
        assert!(!covers(&creds, &strings(&["a", "c"])));
        assert!(covers(&creds, &[]));
        assert_eq!(scope_key(Some("b a")), scope_key(Some("a  b")));
    }
}
