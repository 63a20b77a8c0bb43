provider "azurerm" {
  features {}
}

resource "azurerm_resource_group" "web" {
  name     = "rg-web"
  location = "westeurope"
}

resource "azurerm_service_plan" "web" {
  name                = "plan-web"
  resource_group_name = azurerm_resource_group.web.name
  location            = azurerm_resource_group.web.location
  os_type             = "Linux"
  sku_name            = "P1v3"
}

resource "azurerm_linux_web_app" "api" {
  name                = "app-acme-api"
  resource_group_name = azurerm_resource_group.web.name
  location            = azurerm_service_plan.web.location
  service_plan_id     = azurerm_service_plan.web.id
  https_only          = true

  site_config {
    always_on = true
    application_stack {
      python_version = "3.11"
    }
  }

  app_settings = {
    LOG_LEVEL = "info"
  }
}
