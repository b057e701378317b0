// pg-protocol (behind `execProtocol`'s parsed messages) uses Node's Buffer;
// the browser build injects this one wherever `Buffer` is a free name.
export { Buffer } from 'buffer'
