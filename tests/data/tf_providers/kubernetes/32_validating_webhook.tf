resource "kubernetes_validating_webhook_configuration_v1" "policy" {
  metadata {
    name = "policy-webhook"
  }

  webhook {
    name                      = "policy.acme.example"
    admission_review_versions = ["v1"]
    side_effects              = "None"
    failure_policy            = "Fail"

    client_config {
      service {
        namespace = "policy"
        name      = "policy-webhook"
        path      = "/validate"
      }
    }

    rule {
      api_groups   = ["apps"]
      api_versions = ["v1"]
      operations   = ["CREATE", "UPDATE"]
      resources    = ["deployments"]
    }
  }
}
