resource "kubernetes_namespace_v1" "payments" {
  metadata {
    name = "payments"
    labels = {
      team        = "platform"
      environment = "prod"
    }
  }
}
