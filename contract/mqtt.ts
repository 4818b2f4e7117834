// The MQTT side of the contract: what a request's MQTT 5 properties ask of the bridge, the
// PUBACK reason a refused request gets, and the shape of a publish with properties. The
// embedded broker and the external-broker client both speak it.
import type { ErrorCode } from './errors.js';
import type { InferTopic } from './topics.js';

/** User properties as MQTT carries them: a name may repeat. */
export type UserProperties = Record<string, string | string[]>;

/** The MQTT 5 properties of a request that the bridge acts on (all absent for MQTT 3.1.1). */
export interface RequestProperties {
  responseTopic?: string | undefined;
  correlationData?: Buffer | undefined;
  /** Seconds; the request's deadline is the earlier of this and `ttl_ms`. */
  messageExpiryInterval?: number | undefined;
  userProperties?: UserProperties | undefined;
  /** `application/cbor` asks for CBOR both ways; anything else (or none) is JSON. */
  contentType?: string | undefined;
  /** Properties the PUBLISH gave more than once (a protocol error; the first value is kept above). */
  repeated?: string[] | undefined;
}

export const CONTENT_TYPE_JSON = 'application/json';
export const CONTENT_TYPE_CBOR = 'application/cbor';

/** A Content Type's media type: without parameters, lower case (`Image/JPEG; q=1` → `image/jpeg`). */
export function mediaType(contentType: string): string {
  return (contentType.split(';')[0] ?? '').trim().toLowerCase();
}

/** Whether a request (and so its reply) is CBOR: its Content Type, without parameters, any case. */
export function isCborRequest(properties: RequestProperties): boolean {
  const { contentType } = properties;
  if (contentType === undefined) return false;
  return contentType === CONTENT_TYPE_CBOR || mediaType(contentType) === CONTENT_TYPE_CBOR;
}

/** What an MQTT 3.1.1 request (or an MQTT 5 one without properties) carries: shared, never written. */
const NO_PROPERTIES: RequestProperties = Object.freeze({});

/**
 * The properties the bridge acts on, out of an MQTT 5 PUBLISH's (as both brokers decode them).
 * A decoder hands a property given more than once as an array: only its first value goes on, so
 * no array reaches code that expects one value, and the repetition is named for the refusal.
 */
export function requestPropertiesOf(properties: RequestProperties | undefined): RequestProperties {
  if (!properties) return NO_PROPERTIES;
  const repeated: string[] = [];
  const once = <T>(name: string, value: T | undefined): T | undefined => {
    if (!Array.isArray(value)) return value;
    repeated.push(name);
    return value[0] as T;
  };
  const result: RequestProperties = {
    responseTopic: once('Response Topic', properties.responseTopic),
    correlationData: once('Correlation Data', properties.correlationData),
    messageExpiryInterval: once('Message Expiry Interval', properties.messageExpiryInterval),
    userProperties: properties.userProperties,
    contentType: once('Content Type', properties.contentType),
  };
  if (repeated.length > 0) result.repeated = repeated;
  return result;
}

/** One request as either broker hands it over, before it is acknowledged. */
export interface InboundRequest {
  topic: InferTopic;
  payload: Buffer;
  properties: RequestProperties;
  /**
   * The plant's broker sent it to the bridge's session before (MQTT DUP): a bridge that held
   * the session then may have admitted and answered it.
   */
  redelivered?: boolean;
}

/** Why a request was refused at admission: sent in an MQTT 5 PUBACK (v3.1.1 has no reason). */
export interface PubackRefusal {
  reasonCode: number;
  reasonString: string;
}

/**
 * Admits one request and resolves once it is queued or answered with an error reply; only
 * then is its PUBACK sent. A refusal, when there is one, is that PUBACK's MQTT 5 reason.
 */
export type RequestHandler = (request: InboundRequest) => Promise<PubackRefusal | void>;

/** MQTT 5 properties the bridge sets on what it publishes. */
export interface PublishProperties {
  contentType?: string | undefined;
  correlationData?: Buffer | undefined;
  messageExpiryInterval?: number | undefined;
  userProperties?: UserProperties | undefined;
}

export interface PublishOptions {
  qos: 0 | 1;
  retain: boolean;
  properties?: PublishProperties | undefined;
}

/** How the bridge publishes into MQTT, whichever broker carries it. */
export type Publish = (topic: string, payload: Buffer, options: PublishOptions) => Promise<void>;

/** MQTT 5 reason codes a PUBACK may carry (MQTT 5.0, 3.4.2.1). */
export const PUBACK_REASON = {
  implementationSpecificError: 0x83,
  notAuthorized: 0x87,
  quotaExceeded: 0x97,
  payloadFormatInvalid: 0x99,
} as const;

/** The PUBACK reason of a request refused with an error reply of this code. */
export function pubackReasonOf(code: ErrorCode): number {
  switch (code) {
    case 'rate_limited':
    case 'budget_exceeded':
      return PUBACK_REASON.quotaExceeded;
    case 'invalid_request':
    case 'payload_too_large':
      return PUBACK_REASON.payloadFormatInvalid;
    default:
      return PUBACK_REASON.implementationSpecificError;
  }
}

/** Bounds on what a request's user properties may make the bridge echo. */
export const MAX_ECHOED_USER_PROPERTIES = 16;
export const MAX_ECHOED_USER_PROPERTY_BYTES = 1024;
/** The longest Response Topic a request may name, in bytes (MAX_TOPIC_LENGTH's default). */
export const MAX_RESPONSE_TOPIC_BYTES = 1024;

/**
 * Why a response topic may not be used, or null when it may: it must lie in the device's
 * own namespace `devices/{id}/…`, outside its request topics, with no wildcard, so no
 * device can make the bridge publish into another's topics or into a request topic.
 */
export function responseTopicProblem(deviceId: string, topic: string): string | null {
  const bytes = Buffer.byteLength(topic);
  if (bytes > MAX_RESPONSE_TOPIC_BYTES) return `response topic is ${bytes} bytes, over ${MAX_RESPONSE_TOPIC_BYTES}`;
  const own = `devices/${deviceId}/`;
  if (!topic.startsWith(own) || topic.length === own.length) {
    return `response topic "${topic}" must lie under ${own}`;
  }
  if (topic.includes('+') || topic.includes('#')) return `response topic "${topic}" must not hold a wildcard`;
  if (topic.startsWith(`${own}infer/`) || topic === `${own}infer`) {
    return `response topic "${topic}" must not be a request topic`;
  }
  return null;
}

/**
 * What a request's MQTT 5 properties ask of its reply, kept with the queued job (plain
 * data: it survives a JSON round trip through the store).
 */
export interface ReplyRoute {
  /** The Response Topic: the reply is published there too. */
  responseTopic?: string | undefined;
  /** The Correlation Data, base64: sent back byte for byte with the reply on the response topic. */
  correlationData?: string | undefined;
  /** Echoed on the reply. */
  userProperties?: UserProperties | undefined;
  /** The reply's encoding when it is not JSON (the request's Content Type), on every topic. */
  format?: 'cbor' | undefined;
}
