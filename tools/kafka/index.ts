export { kafkaUnavailableReason, startKafkaBroker, type KafkaBroker, type KafkaBrokerOptions } from './broker.js';
